#include "tests/support/run_until.h"

namespace ductus::test {

bool runUntil(uv_loop_t* loop, const std::function<bool()>& pred,
              std::chrono::milliseconds limit) {
  // The guard bounds the wait; its 5 ms repeat also wakes the loop so a
  // predicate on a receiver thread's state is seen while the loop idles.
  uv_timer_t guard;
  uv_timer_init(loop, &guard);
  // The loop's cached time may be from before the test blocked (creating a
  // database under load took over 5 s once): counted from it, the limit
  // was already past and the wait ended at the first tick.
  uv_update_time(loop);
  struct Deadline {
    uint64_t at;
    bool expired = false;
  } deadline{uv_now(loop) + static_cast<uint64_t>(limit.count())};
  guard.data = &deadline;
  uv_timer_start(
      &guard,
      [](uv_timer_t* t) {
        auto* d = static_cast<Deadline*>(t->data);
        if (uv_now(t->loop) >= d->at) d->expired = true;
      },
      5, 5);
  while (!pred() && !deadline.expired) uv_run(loop, UV_RUN_ONCE);
  uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);  // let the guard's close finish
  return pred();
}

}  // namespace ductus::test
