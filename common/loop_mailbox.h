// LoopMailbox: what a thread of ours (an SFTP session's, a SQL Server
// connection's) hands back to the loop. Threads post() from anywhere; the
// loop runs the functions in order, through one uv_async. The owner
// close()s it on the loop when it goes: what was not run yet is dropped
// there, and a thread posting later (it may outlive the owner, finishing a
// blocking call) drops its function itself.
// Header-only: common/ does not link libuv; its users do.
#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace ductus {

class LoopMailbox {
 public:
  explicit LoopMailbox(uv_loop_t* loop);
  // Does not close: a thread may drop the last reference, off the loop.
  ~LoopMailbox() = default;
  LoopMailbox(const LoopMailbox&) = delete;
  LoopMailbox& operator=(const LoopMailbox&) = delete;

  // Any thread. fn runs on the loop, never inside post(); never after close().
  void post(std::function<void()> fn);
  // On the loop, once. A function running now may call it (it may destroy
  // the owner): nothing after it runs.
  void close();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

struct LoopMailbox::State {
  std::mutex mutex;
  std::deque<std::function<void()>> waiting;
  bool closed = false;
  uv_async_t* async = nullptr;  // owned by the loop until its close callback
};

inline LoopMailbox::LoopMailbox(uv_loop_t* loop) : state_(std::make_shared<State>()) {
  auto* async = new uv_async_t;
  // The handle holds the state while it is open, so the callback may run
  // after the owner (and this object) are gone.
  async->data = new std::shared_ptr<State>(state_);
  uv_async_init(loop, async, [](uv_async_t* h) {
    std::shared_ptr<State> s = *static_cast<std::shared_ptr<State>*>(h->data);
    for (;;) {
      std::function<void()> fn;
      {
        std::lock_guard lock(s->mutex);
        if (s->closed || s->waiting.empty()) return;
        fn = std::move(s->waiting.front());
        s->waiting.pop_front();
      }
      fn();  // may close the mailbox: `closed` is checked again first
    }
  });
  state_->async = async;
}

inline void LoopMailbox::post(std::function<void()> fn) {
  std::unique_lock lock(state_->mutex);
  if (state_->closed) {
    lock.unlock();
    return;  // fn is freed here, on the posting thread
  }
  state_->waiting.push_back(std::move(fn));
  uv_async_send(state_->async);
}

inline void LoopMailbox::close() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->closed) return;
    state_->closed = true;
    dropped.swap(state_->waiting);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(state_->async), [](uv_handle_t* h) {
    delete static_cast<std::shared_ptr<State>*>(h->data);
    delete reinterpret_cast<uv_async_t*>(h);
  });
}

}  // namespace ductus
