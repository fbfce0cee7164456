// The one way tests run a libuv loop until something holds.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>

namespace ductus::test {

// Runs the loop until pred() holds; false if `limit` passes first. A guard
// timer keeps the loop alive, bounds the wait and wakes the loop every 5 ms,
// so a predicate on another thread's state is seen while the loop idles.
bool runUntil(uv_loop_t* loop, const std::function<bool()>& pred,
              std::chrono::milliseconds limit = std::chrono::seconds(10));

}  // namespace ductus::test
