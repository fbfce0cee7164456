#include "common/net/loop_post.h"

#include <memory>

namespace ductus::net {
namespace {

// One-shot timer that owns the function; freed in its close callback, as
// libuv requires of every handle whose init succeeded.
struct Posted {
  uv_timer_t timer;
  std::function<void()> fn;
};

}  // namespace

void postToLoop(uv_loop_t* loop, std::function<void()> fn) {
  auto posted = std::make_unique<Posted>();
  posted->fn = std::move(fn);
  uv_timer_init(loop, &posted->timer);  // cannot fail for a valid loop
  posted->timer.data = posted.get();
  uv_timer_start(
      &posted->timer,
      [](uv_timer_t* t) {
        auto* p = static_cast<Posted*>(t->data);
        auto fn = std::move(p->fn);
        uv_close(reinterpret_cast<uv_handle_t*>(t),
                 [](uv_handle_t* h) { delete static_cast<Posted*>(h->data); });
        fn();
      },
      0, 0);
  posted.release();  // owned by the timer until its close callback
}

}  // namespace ductus::net
