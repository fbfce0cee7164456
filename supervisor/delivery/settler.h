// Settler: sets messages' overall status from their deliveries, for every
// delivery loop of one interface, one settle at a time.
//
// Each loop hands over the messages whose delivery it has finished, once
// that flush has committed. The settler coalesces them (a message finished
// by 25 destinations at about the same time is settled once) and runs one
// Store::settle at a time with everything handed over before it started.
// Why one at a time: with a settle of each loop's own, at 25 destinations
// the settles of the last few destinations to finish a message locked the
// same rows and waited on each other (pg_stat_statements in bench-fanout:
// the database's largest cost, 2,531 lock statements at 5.3 ms in one run,
// 19,021 at 9.4 ms in the next), each holding a pooled connection the
// loops' reads and flushes wanted.
//
// Why nothing is missed: a settle started after a flush committed sees that
// flush (Store::settle reads the deliveries in a snapshot of its own), and
// what a loop hands over while a settle runs waits for the next, which
// starts after it. Of a message's last two deliveries, finished by flushes
// at about the same time, the settle that starts after the later commit
// sees both done.
//
// A failed settle is tried again after the loops' back-off, with whatever
// arrived meanwhile, or at once when a loop hands more over (its flush
// committed: the database answers again). When the engine stops, finish()
// settles what the stopped loops handed over, once, waiting at most
// finishWait; what it leaves, the next start settles (Store::settleFinished:
// every message left pending with no delivery pending).
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/uv_handle.h"
#include "schema/store.h"
#include "supervisor/delivery/backoff.h"

namespace ductus::delivery {

class Settler {
 public:
  // How long finish() waits for the stop's settle at most.
  static constexpr std::chrono::milliseconds kFinishWait{5000};

  Settler(uv_loop_t* loop, store::Store& store, std::string interfaceName, Backoff backoff = {},
          std::chrono::milliseconds finishWait = kFinishWait);
  ~Settler();
  Settler(const Settler&) = delete;
  Settler& operator=(const Settler&) = delete;

  // Messages whose deliveries a committed flush finished (or found
  // finished): settled by the next settle that starts.
  void add(const std::vector<store::MessageRef>& messages);

  // Once the loops have stopped: no more retries; the settle running now
  // and one more for what is queued, then `done` (a failure is logged and
  // left for the next start), or `done` after finishWait whatever is still
  // running. Called once.
  void finish(std::function<void()> done);

  // Settles started, and how many of them failed (for the tests).
  int64_t settles() const { return settles_; }
  int64_t failures() const { return failures_; }
  // Messages waiting for the next settle.
  size_t queued() const { return queued_.size(); }

 private:
  void start();
  void ended();  // a settle answered, or there was nothing to settle
  static void onRetry(uv_timer_t* t);

  uv_loop_t* loop_;
  store::Store& store_;
  std::string interfaceName_;
  Backoff backoff_;
  std::chrono::milliseconds finishWait_;
  std::map<int64_t, store::MessageRef> queued_;  // by id: the settle locks in id order
  bool running_ = false;
  int attempt_ = 0;                 // failures in a row
  std::function<void()> finished_;  // finish()'s done, until it is called
  bool finishing_ = false;
  UvHandle<uv_timer_t> retry_;
  UvHandle<uv_timer_t> finishTimer_;
  int64_t settles_ = 0, failures_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::delivery
