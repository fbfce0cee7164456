#include "supervisor/monitor/event_recorder.h"

#include <algorithm>
#include <vector>

#include "common/log.h"
#include "schema/event_store.h"

namespace ductus::supervisor {

namespace {
// A failed write is tried again this much later (and said at most once a
// minute): a database that is away is not asked every second.
constexpr std::chrono::milliseconds kEventRetryAfter{5'000};
}  // namespace

EventRecorder::EventRecorder(uv_loop_t* loop, Options options) : loop_(loop), options_(options) {
  options_.batch = std::max<size_t>(1, options_.batch);
  options_.maxQueued = std::max<size_t>(1, options_.maxQueued);
  options_.maxRows = std::max<int64_t>(1, options_.maxRows);
  options_.purgeBatch = std::max<int64_t>(1, options_.purgeBatch);
}

EventRecorder::~EventRecorder() { *alive_ = false; }

void EventRecorder::record(events::Event e) {
  if (queue_.size() >= options_.maxQueued) {
    ++droppedUnsaid_;
    ++droppedTotal_;
    return;
  }
  queue_.push_back(std::move(e));
  arm(options_.every);
}

void EventRecorder::arm(std::chrono::milliseconds after) {
  if (armed_ || !timer_ || writing_ || stopped_) return;
  armed_ = true;
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<EventRecorder*>(t->data)) self->turn();
      },
      static_cast<uint64_t>(after.count()), 0);
}

void EventRecorder::start(store::PgPool& pool) {
  pool_ = &pool;
  timer_ = makeTimer(loop_, this);
  purgeTimer_ = makeTimer(loop_, this);
  auto every = static_cast<uint64_t>(options_.purgeEvery.count());
  uv_timer_start(
      purgeTimer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<EventRecorder*>(t->data)) self->purge([](auto) {});
      },
      every, every);
  // The purge's timer alone must not keep a loop running.
  uv_unref(reinterpret_cast<uv_handle_t*>(purgeTimer_.get()));
  if (!queue_.empty() || droppedUnsaid_) arm(std::chrono::milliseconds(0));
}

void EventRecorder::turn() {
  armed_ = false;
  writeAll([] {});
}

void EventRecorder::sayDropped() {
  if (!droppedUnsaid_) return;
  uint64_t n = std::exchange(droppedUnsaid_, 0);
  spdlog::warn(
      "events: {} event(s) dropped since the last write: {} were already waiting to be "
      "written; the Events page misses them",
      n, options_.maxQueued);
  events::Event e;
  e.kind = events::Kind::EventsDropped;
  e.detail = std::to_string(n) + " event(s) dropped: " + std::to_string(options_.maxQueued) +
             " were already waiting to be written";
  // Said even when the queue is full again: it is what explains the gap.
  queue_.push_back(std::move(e));
}

void EventRecorder::writeAll(std::function<void()> then) {
  if (!pool_) return then();
  if (writing_) {
    // After the write in flight (flushNow during a turn's write).
    auto before = std::move(afterWrite_);
    afterWrite_ = [before = std::move(before), then = std::move(then)] {
      if (before) before();
      then();
    };
    return;
  }
  sayDropped();
  if (queue_.empty()) return then();
  writing_ = true;
  size_t n = std::min(queue_.size(), options_.batch);
  std::vector<events::Event> rows(std::make_move_iterator(queue_.begin()),
                                  std::make_move_iterator(queue_.begin() + static_cast<long>(n)));
  queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n));
  auto sending = std::make_shared<std::vector<events::Event>>(std::move(rows));
  store::addEvents(
      *pool_, *sending, [this, alive = alive_, sending, then = std::move(then)](Status s) mutable {
        if (!*alive) return then();
        writing_ = false;
        auto after = std::exchange(afterWrite_, nullptr);
        if (!s) {
          auto now = std::chrono::steady_clock::now();
          if (now - lastFailureSaid_ >= std::chrono::minutes(1)) {
            lastFailureSaid_ = now;
            spdlog::warn("events: writing {} event(s) failed ({}); tried again in {} s",
                         sending->size(), s.error().message, kEventRetryAfter.count() / 1000);
          }
          // Back in front, in their order; the bound holds: the oldest go.
          queue_.insert(queue_.begin(), std::make_move_iterator(sending->begin()),
                        std::make_move_iterator(sending->end()));
          while (queue_.size() > options_.maxQueued) {
            queue_.pop_front();
            ++droppedUnsaid_;
            ++droppedTotal_;
          }
          then();
          if (after) after();
          arm(kEventRetryAfter);
          return;
        }
        ++statements_;
        sinceTrim_ += static_cast<int64_t>(sending->size());
        if (sinceTrim_ >= std::max<int64_t>(1, options_.maxRows / 10)) purge([](auto) {});
        // The rest of the queue, a batch a statement, before `then`.
        writeAll([then = std::move(then), after = std::move(after)]() mutable {
          then();
          if (after) after();
        });
      });
}

void EventRecorder::flushNow(std::function<void()> done) {
  // No timer after the stop: what is recorded later stays in memory.
  stopped_ = true;
  if (timer_) uv_timer_stop(timer_.get());
  armed_ = false;
  if (purgeTimer_) uv_timer_stop(purgeTimer_.get());
  writeAll(std::move(done));
}

void EventRecorder::purgeNow(std::function<void(Result<int64_t>)> done) { purge(std::move(done)); }

void EventRecorder::purge(std::function<void(Result<int64_t>)> done) {
  if (!pool_ || purging_) return done(int64_t{0});
  purging_ = true;
  sinceTrim_ = 0;
  store::purgeEvents(
      *pool_, options_.keep, options_.maxRows, options_.purgeBatch,
      [this, alive = alive_, done = std::move(done)](Result<int64_t> n) {
        if (!*alive) return done(n);
        purging_ = false;
        if (!n)
          spdlog::warn("events: deleting events past their bound failed: {}", n.error().message);
        else if (*n > 0)
          spdlog::debug("events: {} past events.keep or events.max_rows deleted", *n);
        done(n);
      });
}

}  // namespace ductus::supervisor
