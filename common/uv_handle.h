// UvHandle<T>: the owner of one libuv handle. libuv's rule (docs/design.rst)
// is that a handle whose init succeeded must be uv_close()d and its memory
// freed only in or after the close callback; this type does exactly that,
// so no handle outlives or predeceases its owner by accident.
#pragma once

#include <uv.h>

#include <memory>
#include <utility>

namespace ductus {

template <typename T>
class UvHandle {
 public:
  UvHandle() = default;
  // Allocates the handle; the caller runs uv_*_init on get() and then
  // calls markInitialized() if it succeeded.
  static UvHandle make() {
    UvHandle h;
    h.h_ = new T{};  // freed in onClose (or below if never initialized)
    return h;
  }
  UvHandle(UvHandle&& o) noexcept
      : h_(std::exchange(o.h_, nullptr)), init_(std::exchange(o.init_, false)) {}
  UvHandle& operator=(UvHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
      init_ = std::exchange(o.init_, false);
    }
    return *this;
  }
  UvHandle(const UvHandle&) = delete;
  UvHandle& operator=(const UvHandle&) = delete;
  ~UvHandle() { reset(); }

  T* get() const { return h_; }
  T* operator->() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  void markInitialized() { init_ = true; }

  void reset() {
    if (!h_) return;
    if (init_) {
      auto* base = reinterpret_cast<uv_handle_t*>(h_);
      base->data = nullptr;
      if (!uv_is_closing(base)) uv_close(base, &UvHandle::onClose);
    } else {
      delete h_;
    }
    h_ = nullptr;
    init_ = false;
  }

 private:
  static void onClose(uv_handle_t* h) { delete reinterpret_cast<T*>(h); }
  T* h_ = nullptr;
  bool init_ = false;
};

// A timer on `loop` whose callbacks find `data` in handle->data. uv_timer_init
// cannot fail on an initialized loop.
inline UvHandle<uv_timer_t> makeTimer(uv_loop_t* loop, void* data) {
  auto t = UvHandle<uv_timer_t>::make();
  uv_timer_init(loop, t.get());
  t.markInitialized();
  t->data = data;
  return t;
}

// What a loop's owner does last: close every handle still open (a run cut
// short leaves some behind, their owners gone), let the close callbacks
// run, and close the loop. Returns uv_loop_close's code: UV_EBUSY while a
// request (a write, a thread-pool job) is still pending.
inline int closeLoop(uv_loop_t* loop) {
  uv_walk(
      loop,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, nullptr);
      },
      nullptr);
  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop);
}

}  // namespace ductus
