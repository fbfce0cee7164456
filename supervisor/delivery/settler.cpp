#include "supervisor/delivery/settler.h"

#include "common/log.h"

namespace ductus::delivery {

Settler::Settler(uv_loop_t* loop, store::Store& store, std::string interfaceName, Backoff backoff,
                 std::chrono::milliseconds finishWait)
    : loop_(loop),
      store_(store),
      interfaceName_(std::move(interfaceName)),
      backoff_(backoff),
      finishWait_(finishWait) {
  retry_ = makeTimer(loop_, this);
  finishTimer_ = makeTimer(loop_, this);
}

Settler::~Settler() { *alive_ = false; }

void Settler::add(const std::vector<store::MessageRef>& messages) {
  for (auto& m : messages) queued_.emplace(m.id, m);
  // A settle running now may have read before these flushes committed: they
  // wait for the next. A retry waiting for its back-off goes now, with
  // them: a flush has just committed, so the database answers again, and
  // messages whose deliveries are all done would otherwise show pending
  // for as long as the back-off (up to a minute after an outage).
  if (running_) return;
  uv_timer_stop(retry_.get());
  start();
}

void Settler::finish(std::function<void()> done) {
  finishing_ = true;
  finished_ = std::move(done);
  // The stop waits for this at most finishWait_: a settle waiting on a row
  // lock (up to the statement timeout) or on a database that stopped
  // answering must not hold the stop, or a handover's pause. What it
  // leaves, the next start (or the successor's) settles.
  uv_timer_start(
      finishTimer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<Settler*>(t->data);
        if (!self || !self->finished_) return;
        logWith(spdlog::level::warn, LogFields{.interface = self->interfaceName_},
                "{}: settling at stop did not finish within {} ms; the next start settles "
                "what is left",
                self->interfaceName_, self->finishWait_.count());
        if (auto d = std::exchange(self->finished_, nullptr)) d();
      },
      static_cast<uint64_t>(finishWait_.count()), 0);
  // A retry waiting for its back-off goes now, once.
  uv_timer_stop(retry_.get());
  if (!running_) start();
}

void Settler::start() {
  if (queued_.empty()) return ended();
  std::vector<store::MessageRef> batch;
  batch.reserve(queued_.size());
  for (auto& [id, m] : queued_) batch.push_back(std::move(m));
  queued_.clear();
  running_ = true;
  ++settles_;
  auto copy = std::make_shared<std::vector<store::MessageRef>>(batch);
  store_.settle(std::move(batch), [this, alive = alive_, copy](Result<int64_t> r) {
    if (!*alive) return;
    running_ = false;
    if (r) {
      attempt_ = 0;
      // What arrived while this one ran.
      if (!queued_.empty()) return start();
      return ended();
    }
    ++failures_;
    // Their statuses are committed and nothing else would settle them
    // before a restart: kept, and tried again with what arrives meanwhile.
    for (auto& m : *copy) queued_.emplace(m.id, m);
    if (finishing_) {
      logWith(spdlog::level::warn, LogFields{.interface = interfaceName_},
              "{}: settling {} message(s) failed at stop ({}); the next start settles them",
              interfaceName_, queued_.size(), r.error().message);
      return ended();
    }
    auto delay = backoff_.after(attempt_++);
    logWith(spdlog::level::warn, LogFields{.interface = interfaceName_},
            "{}: settling {} message(s) failed ({}); retrying in {} ms", interfaceName_,
            queued_.size(), r.error().message, delay.count());
    uv_timer_start(retry_.get(), &Settler::onRetry, static_cast<uint64_t>(delay.count()), 0);
  });
}

void Settler::ended() {
  if (!finishing_ || running_) return;
  uv_timer_stop(finishTimer_.get());
  if (auto done = std::exchange(finished_, nullptr)) done();
}

void Settler::onRetry(uv_timer_t* t) {
  auto* self = static_cast<Settler*>(t->data);
  if (self && !self->running_) self->start();
}

}  // namespace ductus::delivery
