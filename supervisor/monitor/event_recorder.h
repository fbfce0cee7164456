// EventRecorder: the engine's events (common/event_log.h) into the bounded
// `events` table (schema/event_store.h), the one Sink the engine hands to
// whoever sees one happen: the MLLP listeners (AR refusals), the delivery
// loops (a delivery given up after its retries), the worker pool (a worker
// restarted, a runaway), the runaway guard, the operator's intake stops
// and starts, the alert round (fired, resolved).
//
// record() only appends to a queue in memory: it never blocks the loop
// and never fails. At most `every` later the queue is written, up to
// `batch` rows a statement, so a storm of events costs a statement per
// thousand, not one each. The queue holds at most `maxQueued`: past that
// an event is dropped and counted, and the next write says how many in the
// log and in an `events_dropped` row. A write that fails keeps its rows
// (within the same bound) and is tried again 5 s later. Events recorded
// before start() (the workers start beside the database's steps) wait in
// the queue. The stop writes what waits; an event still in memory at a
// crash is lost: they are notes for a person, and no message depends on
// one.
//
// The table is kept bounded here: every `purgeEvery` (and as soon as a
// tenth of maxRows was written since the last time) rows older than
// `keep` and all but the newest `maxRows` are deleted, oldest first. So
// the table holds at most maxRows plus a tenth of it.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "common/event_log.h"
#include "common/result.h"
#include "common/uv_handle.h"

namespace ductus::store {
class PgPool;
}

namespace ductus::supervisor {

class EventRecorder final : public events::Sink {
 public:
  struct Options {
    size_t maxQueued = 10'000;  // waiting to be written; past it dropped and counted
    size_t batch = 1'000;       // rows a statement
    std::chrono::milliseconds every{1'000};
    std::chrono::seconds keep{std::chrono::hours(24 * 30)};  // events: { keep: }
    int64_t maxRows = 100'000;                               // events: { max_rows: }
    std::chrono::milliseconds purgeEvery{std::chrono::hours(1)};
    int64_t purgeBatch = 10'000;  // rows a DELETE
  };
  EventRecorder(uv_loop_t* loop, Options options);
  ~EventRecorder() override;
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  void record(events::Event e) override;

  // Writes from now on into `pool` (what waits first), and purges.
  void start(store::PgPool& pool);
  // Writes what waits (the stop), then `done`, written or not; nothing is
  // written after it.
  void flushNow(std::function<void()> done);
  // The purge now (the tests); `done` hears how many rows went.
  void purgeNow(std::function<void(Result<int64_t>)> done);

  size_t queued() const { return queue_.size(); }
  uint64_t dropped() const { return droppedTotal_; }   // since the start
  uint64_t statements() const { return statements_; }  // INSERTs that succeeded

 private:
  void arm(std::chrono::milliseconds after);
  void turn();
  // Writes the queue, a batch a statement, one after another; then `then`.
  void writeAll(std::function<void()> then);
  void purge(std::function<void(Result<int64_t>)> done);
  void sayDropped();

  uv_loop_t* loop_;
  Options options_;
  store::PgPool* pool_ = nullptr;
  std::deque<events::Event> queue_;
  uint64_t droppedUnsaid_ = 0, droppedTotal_ = 0, statements_ = 0;
  int64_t sinceTrim_ = 0;  // rows written since the last purge
  bool writing_ = false, purging_ = false, armed_ = false, stopped_ = false;
  std::function<void()> afterWrite_;  // flushNow() during a write
  std::chrono::steady_clock::time_point lastFailureSaid_{};
  UvHandle<uv_timer_t> timer_;
  UvHandle<uv_timer_t> purgeTimer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
