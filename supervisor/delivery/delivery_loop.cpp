#include "supervisor/delivery/delivery_loop.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <set>
#include <utility>

#include "common/log.h"
#include "intake/intake.h"

namespace ductus::delivery {
namespace {

using store::MessageStatus;

std::string runawayText(Outcome::Kind k, const std::string& data) {
  std::string why = k == Outcome::Kind::RunawayHeap ? "runaway: the script filled its heap"
                                                    : "runaway: the script ran past its timeout";
  return data.empty() ? why : why + ": " + data;
}

}  // namespace

DeliveryLoop::DeliveryLoop(uv_loop_t* loop, store::Store& store, Transformer& transformer,
                           DeliveryTarget target, std::vector<int32_t> lanes, DeliveryTiming timing)
    : loop_(loop), store_(store), transformer_(transformer), target_(std::move(target)),
      lanes_(std::move(lanes)), timing_(std::move(timing)) {
  if (target_.rateLimit && target_.rateLimit->count > 0) limiter_.emplace(*target_.rateLimit);
  timer_ = makeTimer(loop_, this);
  if (!target_.settler) {
    ownSettler_ = std::make_unique<Settler>(loop_, store_, target_.interfaceName, timing_.backoff);
    target_.settler = ownSettler_.get();
  }
  flushTimer_ = makeTimer(loop_, this);
}

DeliveryLoop::~DeliveryLoop() { *alive_ = false; }

int64_t DeliveryLoop::receivedAtMs(const std::string& t) {
  // Postgres' text of a timestamptz: "2026-12-02 16:50:01.123456+00".
  std::tm tm{};
  int us = 0, tzh = 0, tzm = 0;
  char sign = '+';
  int n = std::sscanf(t.c_str(), "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                      &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
  if (n != 6) return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  size_t p = t.find('.', 10);
  size_t z = t.find_first_of("+-", 19);
  if (p != std::string::npos && (z == std::string::npos || p < z)) {
    std::string frac = t.substr(p + 1, (z == std::string::npos ? t.size() : z) - p - 1);
    frac.resize(6, '0');
    us = std::atoi(frac.c_str());
  }
  if (z != std::string::npos) {
    sign = t[z];
    std::sscanf(t.c_str() + z + 1, "%d:%d", &tzh, &tzm);
  }
  int64_t secs = timegm(&tm) - (sign == '-' ? -1 : 1) * (tzh * 3600 + tzm * 60);
  return secs * 1000 + us / 1000;
}

void DeliveryLoop::wake() {
  emptySeen_ = false;
  if (stopping_ || phase_ == Phase::Stopped) return;
  // Idle implies no hold: a held loop is Parked.
  if (phase_ == Phase::Idle) return idleUntilWindow();
  if (phase_ != Phase::Windowing) wakeAgain_ = true;
}

void DeliveryLoop::enter(Phase next, std::chrono::milliseconds wait) {
  if (phase_ == Phase::Stopped) return;  // never left
  phase_ = next;
  // When the head of its lanes is tried again, for GET /hotspots: from
  // a failure's back-off to the next phase, whatever that is.
  if (auto* a = target_.activity) {
    if (next == Phase::BackingOff && retryMessage_ != 0) {
      int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
      a->waitRetry(this, RetryWait{retryMessage_, lanes_, now + wait.count()});
      retryShown_ = true;
    } else if (retryShown_) {
      a->endRetry(this);
      retryShown_ = false;
    }
  }
  if (next == Phase::BackingOff) retryMessage_ = 0;
  switch (next) {
    case Phase::Idle:
      if (timing_.safetyNet.count() > 0) return armTimer(timing_.safetyNet);
      uv_timer_stop(timer_.get());
      return;
    case Phase::Windowing:
      return armTimer(timing_.wakeWindow);  // replaces the safety net's wait
    case Phase::BackingOff:
      return armTimer(wait);
    case Phase::Parked:
      uv_timer_stop(timer_.get());
      return;
    case Phase::Stopped:
      uv_timer_stop(timer_.get());
      uv_timer_stop(flushTimer_.get());
      return;
    case Phase::Reading:
    case Phase::AwaitingFlushes:
    case Phase::Working:
    case Phase::Flushing:
      return;  // no timer of the phase's own (a rate limit's wait is backpressure)
  }
}

void DeliveryLoop::armTimer(std::chrono::milliseconds delay) {
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<DeliveryLoop*>(t->data);
        if (!self) return;
        switch (self->phase_) {
          case Phase::Idle:
          case Phase::Windowing:
          case Phase::BackingOff:
            if (self->stopping_) return self->maybeStopped();
            if (self->holds_) return self->park();
            return self->read();
          case Phase::Working:
            return self->next();  // a rate limit's wait is over
          default:
            return;
        }
      },
      static_cast<uint64_t>(delay.count()), 0);
}

void DeliveryLoop::idleUntilWindow() {
  if (holds_) return park();
  enter(Phase::Windowing);
}

void DeliveryLoop::read() {
  if (holds_) return park();
  wakeAgain_ = false;
  emptySeen_ = false;
  // Rows whose outcome is still being recorded would be read as pending
  // and sent twice: the read waits for those flushes.
  if (backgroundFlushes_ > 0) return enter(Phase::AwaitingFlushes);
  enter(Phase::Reading);
  auto alive = alive_;
  store_.readQueue(target_.destinationId, lanes_, 0,
                   [this, alive](Result<store::QueueRead> r) {
                     if (!*alive) return;
                     if (!r) {
                       logWith(spdlog::level::warn, fields(), "{}/{}: reading the queue failed: {}",
                               target_.interfaceName, target_.destinationName, r.error().message);
                       return backOff(timing_.backoff.after(failures_++));
                     }
                     lastReadFull_ = r->more;
                     onRows(std::move(r->rows));
                   });
}

void DeliveryLoop::onRows(std::vector<store::QueuedDelivery> rows) {
  // Held while reading: the rows stay pending for the read after release.
  if (holds_ && !stopping_) return park();
  if (rows.empty()) {
    if (stopping_) return maybeStopped();
    if (wakeAgain_) return idleUntilWindow();
    emptySeen_ = true;
    return enter(Phase::Idle);
  }
  enter(Phase::Working);
  items_.clear();
  items_.reserve(rows.size());
  for (auto& row : rows) items_.push_back(Item{std::move(row), std::nullopt, false, std::nullopt});
  pos_ = 0;
  sendPos_ = 0;
  // A stream of the sender's own: the destination's other loops (slots)
  // share the sender, so only it can keep their streams apart.
  stream_ = target_.sender ? target_.sender->newStream() : 0;
  // Every transform of the read at once: the workers pipeline them, and the
  // outputs are still delivered strictly in order below. If a delivery
  // fails, the outputs after it are dropped and transformed again later
  // (at-least-once already allows a transform to run twice).
  auto generation = std::make_shared<int>(0);
  generation_ = generation;
  for (size_t i = 0; i < items_.size(); ++i) {
    const auto& row = items_[i].row;
    CallMeta meta;
    meta.messageId = row.message.id;
    meta.receivedAtMs = receivedAtMs(row.message.receivedAt);
    meta.destination = target_.destinationName;
    meta.originId = row.originId.value_or(0);
    auto alive = alive_;
    auto started = std::chrono::steady_clock::now();
    transformer_.invoke(target_.function, row.payload, meta,
                    [this, alive, generation, i, started](Outcome o) {
                      if (!*alive) return;
                      // From the call to its answer, a wait for a worker included.
                      if (o.kind != Outcome::Kind::Stopped && target_.activity)
                        target_.activity->transform.observe(since(started));
                      if (generation_ != generation) return;
                      items_[i].outcome = std::move(o);
                      // Not only for pos_: a pipelined sender may start on it.
                      if (phase_ == Phase::Working) next();
                    });
  }
}

void DeliveryLoop::next() {
  if (inNext_ || backpressure_ != Backpressure::None) return;
  inNext_ = true;
  bool waiting = false;
  while (pos_ < items_.size()) {
    if (!winding()) launchSends();
    Item& item = items_[pos_];
    if (!item.outcome) {
      waiting = !winding();  // its transform is still running (stopping, held: stop here)
      break;
    }
    if (!needsSend(item)) {
      deliver(item);
    } else if (item.sent) {
      sendDone(item);
    } else if (item.sending) {
      waiting = true;
      break;
    } else {
      if (winding()) break;  // stop at the message in hand
      if (limiter_) {
        auto d = limiter_->tryAcquire(timing_.now());
        if (d.kind == senders::RateDecision::Kind::Drop) {
          finished(MessageStatus::Filtered, std::string("over the rate limit"), std::nullopt);
          continue;
        }
        if (d.kind == senders::RateDecision::Kind::Wait) {
          backpressure_ = Backpressure::RateLimit;  // hold the loop until the timer
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d.wait).count() + 1;
          uv_timer_start(
              timer_.get(),
              [](uv_timer_t* t) {
                auto* self = static_cast<DeliveryLoop*>(t->data);
                if (!self) return;
                self->backpressure_ = Backpressure::None;
                self->next();
              },
              static_cast<uint64_t>(ms), 0);
          inNext_ = false;
          return;
        }
      }
      launch(pos_);
      waiting = true;
      break;
    }
    if (phase_ != Phase::Working) {  // failed(): flushing, then backing off
      inNext_ = false;
      return;
    }
  }
  inNext_ = false;
  if (waiting) return;
  // Cut short by a hold: the rest of the read is read again after release.
  if (pos_ < items_.size()) wakeAgain_ = true;
  // The read is done (or we are stopping): flush, then look again.
  enter(Phase::Flushing);
  auto alive = alive_;
  flush([this, alive](bool ok) {
    if (!*alive) return;
    if (stopping_) return maybeStopped();
    // The outcomes were not recorded, so the rows are still pending: read
    // again at once (after a full read) and they would be sent again and
    // again, as fast as the destination takes them.
    if (!ok) return backOff(timing_.backoff.after(flushFailures_++));
    flushFailures_ = 0;
    readAgainOrIdle();
  });
}

bool DeliveryLoop::needsSend(const Item& item) const {
  return item.outcome && item.outcome->kind == Outcome::Kind::Output && !target_.route;
}

size_t DeliveryLoop::sendDepth() const {
  if (limiter_ || !target_.sender) return 1;
  return std::max<size_t>(1, target_.sender->pipelineDepth());
}

// A pipelined sender gets the sends after pos_ too, in order, while their
// transforms are done: the sender keeps them in order, and fails the later
// ones if one fails. Never past a message that may be retried (transient,
// stopped): nothing behind it may reach the receiver first.
void DeliveryLoop::launchSends() {
  size_t depth = sendDepth();
  if (depth <= 1) return;
  sendPos_ = std::max(sendPos_, pos_);
  while (sendPos_ < items_.size() && sendsInFlight_ < depth) {
    Item& it = items_[sendPos_];
    if (!it.outcome) return;
    auto kind = it.outcome->kind;
    if (kind == Outcome::Kind::Transient || kind == Outcome::Kind::Stopped) return;
    if (needsSend(it) && !it.sending && !it.sent) launch(sendPos_);
    ++sendPos_;
  }
}

void DeliveryLoop::launch(size_t i) {
  Item& item = items_[i];
  senders::SendRequest req;
  req.messageId = item.row.message.id;
  req.interfaceName = target_.interfaceName;
  req.destinationName = target_.destinationName;
  req.payload = item.outcome->data;
  req.stream = stream_;
  item.sending = true;
  ++sendsInFlight_;
  auto alive = alive_;
  auto generation = generation_;
  auto started = std::chrono::steady_clock::now();
  target_.sender->send(std::move(req), [this, alive, generation, i,
                                        started](senders::SendOutcome out) {
    if (!*alive) return;
    if (target_.activity) target_.activity->sendTime.observe(since(started));
    --sendsInFlight_;
    if (generation_ != generation) return;  // the read was abandoned
    items_[i].sending = false;
    items_[i].sent = std::move(out);
    if (phase_ == Phase::Working) next();
  });
}

void DeliveryLoop::sendDone(Item& item) {
  std::optional<std::string> saved;
  if (target_.saveOutput) saved = item.outcome->data;
  senders::SendOutcome out = std::move(*item.sent);
  switch (out.kind) {
    case senders::SendOutcomeKind::Sent:
      return finished(MessageStatus::Sent, std::nullopt, std::move(saved));
    case senders::SendOutcomeKind::Permanent:
      return finished(MessageStatus::Quarantined, out.detail, std::move(saved));
    case senders::SendOutcomeKind::Transient:
      return failed(out.detail);
  }
}

// The outcomes that need no sender: filtered, quarantined, transient,
// stopped, and a route's output (stored with the flush).
void DeliveryLoop::deliver(Item& item) {
  const Outcome& o = *item.outcome;
  switch (o.kind) {
    case Outcome::Kind::Output:
      break;
    case Outcome::Kind::Filtered:
      return finished(MessageStatus::Filtered, o.data.empty() ? std::nullopt
                                                              : std::optional<std::string>(o.data),
                      std::nullopt);
    case Outcome::Kind::Quarantine:
      return finished(MessageStatus::Quarantined, o.data, std::nullopt);
    case Outcome::Kind::RunawayTimeout:
    case Outcome::Kind::RunawayHeap:
      return finished(MessageStatus::Quarantined, runawayText(o.kind, o.data), std::nullopt);
    case Outcome::Kind::Transient:
      return failed(o.data);
    case Outcome::Kind::Stopped:
      // The interface's code is stopped (runaways): its messages stay
      // pending until the code is fixed and the interface restarted.
      logWith(spdlog::level::warn, fields(), "{}/{}: interface stopped; {} message(s) left pending",
              target_.interfaceName, target_.destinationName, items_.size() - pos_);
      interfaceStopped_ = true;
      pos_ = items_.size();
      return;
  }
  // A route: the output is stored in the target's queue with the flush.
  auto keys = target_.route->keysOf(o.data);
  routed_.push_back(store::RoutedItem{item.row.message, o.data, keys.lane, keys.dedupe});
  batched();
  ++counters_.routed;
  report(item, "routed", std::nullopt);
  ++pos_;
  failures_ = 0;
}

void DeliveryLoop::finished(MessageStatus status, std::optional<std::string> why,
                            std::optional<std::string> output) {
  Item& item = items_[pos_];
  batch_.push_back(store::DeliveryOutcome{item.row.message, status, std::move(why),
                                          std::move(output)});
  batched();
  switch (status) {
    case MessageStatus::Sent:
      ++counters_.sent;
      report(item, "sent", std::nullopt);
      break;
    case MessageStatus::Filtered:
      ++counters_.filtered;
      report(item, "filtered", batch_.back().lastError);
      break;
    case MessageStatus::Quarantined:
      ++counters_.quarantined;
      report(item, "quarantined", batch_.back().lastError.value_or("(no reason given)"));
      break;
    default: break;
  }
  ++pos_;
  failures_ = 0;
}

// The line per message a person follows one with (`ductus dev
// --log-level debug`): what became of it here, after how many attempts
// and how long after it was received. A quarantine is a warning: nothing
// retries it, a person has to look (and resend it).
void DeliveryLoop::report(const Item& item, std::string_view outcome,
                          const std::optional<std::string>& why) {
  const bool quarantined = outcome == "quarantined";
  const auto& m = item.row.message;
  int64_t received = receivedAtMs(m.receivedAt);
  int64_t ms = received > 0 ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                      .count() -
                                  received
                            : 0;
  if (auto* a = target_.activity) {
    if (outcome == "sent") count(a->sent);
    else if (outcome == "filtered") count(a->filtered);
    else if (quarantined) count(a->quarantined);
    else count(a->routed);
    if (received > 0) a->latency.observe(std::chrono::milliseconds(ms));
    a->lastFinished.markNow();
    if (outcome == "sent" || outcome == "routed") a->lastSent.markNow();
    if (quarantined) a->markError(a->lastFinished.ms(), why.value_or("quarantined"));
  }
  auto level = quarantined ? spdlog::level::warn : spdlog::level::debug;
  if (!spdlog::default_logger_raw()->should_log(level)) return;
  int64_t attempts = item.row.attempts + 1;
  std::string took;
  LogFields f = fields(m.id);
  f.more = {{"outcome", outcome}, {"attempts", attempts}};
  if (received > 0) {
    took = ", " + std::to_string(ms) + " ms after it was received";
    f.more.push_back({"elapsed_ms", ms});
  }
  if (why) f.more.push_back({"reason", *why});
  logWith(level, f, "{}/{}: message {} {}{}{} (attempt {}{})", target_.interfaceName,
          target_.destinationName, m.id, outcome, why ? ": " : "", why ? *why : std::string(),
          attempts, took);
}

void DeliveryLoop::failed(const std::string& why) {
  Item& item = items_[pos_];
  int attempts = item.row.attempts + 1;
  if (target_.maxAttempts > 0 && attempts >= static_cast<int>(target_.maxAttempts)) {
    std::string gaveUp = "gave up after " + std::to_string(attempts) + " attempts: " + why;
    if (target_.events)
      target_.events->record({events::Kind::DeliveryQuarantined, target_.interfaceName,
                              target_.destinationName, item.row.message.id, gaveUp});
    finished(MessageStatus::Quarantined, std::move(gaveUp), std::nullopt);
    if (phase_ == Phase::Working && !inNext_) next();
    return;
  }
  ++counters_.retries;
  if (auto* a = target_.activity) {
    count(a->retries);
    a->markError(std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count(),
                 why);
  }
  // Record the attempt (attempts + 1, last_error), the message stays
  // pending; then flush everything done before it, and back off.
  batch_.push_back(
      store::DeliveryOutcome{item.row.message, MessageStatus::Pending, why, std::nullopt});
  auto delay = timing_.backoff.after(failures_);
  ++failures_;
  retryMessage_ = item.row.message.id;
  logWith(spdlog::level::warn, fields(item.row.message.id),
          "{}/{}: message {} failed (attempt {}): {}; retrying in {} ms", target_.interfaceName,
          target_.destinationName, item.row.message.id, attempts, why, delay.count());
  items_.clear();
  pos_ = 0;
  generation_.reset();
  enter(Phase::Flushing);
  auto alive = alive_;
  flush([this, alive, delay](bool) {
    if (!*alive) return;
    if (stopping_) return maybeStopped();
    backOff(delay);
  });
}

void DeliveryLoop::backOff(std::chrono::milliseconds delay) {
  enter(Phase::BackingOff, delay);
  if (timing_.onBackoff) timing_.onBackoff(delay);
  if (stopping_) return maybeStopped();
  if (holds_) return park();  // release reads at once: the wait ends with the hold
}

void DeliveryLoop::readAgainOrIdle() {
  items_.clear();
  pos_ = 0;
  generation_.reset();
  if (holds_) {
    interfaceStopped_ = false;
    return park();
  }
  if (interfaceStopped_) {
    interfaceStopped_ = false;
    return enter(Phase::Idle);  // woken reads find it stopped at once again
  }
  // A full read means more are waiting: read on now. A short one emptied
  // the lanes, unless something was stored meanwhile (a wake came).
  if (lastReadFull_) return read();
  if (wakeAgain_) return idleUntilWindow();
  enter(Phase::Idle);
}

void DeliveryLoop::batched() {
  if (batch_.size() + routed_.size() != 1) return;  // the timer runs already
  uv_timer_start(
      flushTimer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<DeliveryLoop*>(t->data)) self->flushInBackground();
      },
      static_cast<uint64_t>(timing_.flushAfter.count()), 0);
}

// The read goes on while these outcomes are recorded: they are other rows
// than the ones still in hand, so the order of the two flushes is free.
void DeliveryLoop::flushInBackground() {
  if (phase_ != Phase::Working || (batch_.empty() && routed_.empty())) return;
  ++backgroundFlushes_;
  auto alive = alive_;
  flush([this, alive](bool ok) {
    if (!*alive) return;
    if (!ok) backgroundFlushFailed_ = true;
    if (--backgroundFlushes_ > 0) return;
    bool failed = std::exchange(backgroundFlushFailed_, false);
    if (phase_ == Phase::Stopped) return maybeStopped();
    if (phase_ == Phase::AwaitingFlushes) {
      if (stopping_) return maybeStopped();
      // As after a failed flush in next(): the rows are still pending.
      if (failed) return backOff(timing_.backoff.after(flushFailures_++));
      flushFailures_ = 0;
      read();
    }
  });
}

void DeliveryLoop::flush(std::function<void(bool ok)> then) {
  uv_timer_stop(flushTimer_.get());
  if (batch_.empty() && routed_.empty()) return then(true);
  ++counters_.flushes;
  counters_.largestFlush = std::max(counters_.largestFlush, batch_.size() + routed_.size());
  auto outcomes = std::make_shared<std::vector<store::DeliveryOutcome>>(std::move(batch_));
  auto routed = std::make_shared<std::vector<store::RoutedItem>>(std::move(routed_));
  batch_.clear();
  routed_.clear();
  auto alive = alive_;

  auto doRouted = [this, alive, routed, then](bool okSoFar) {
    if (!*alive) return;
    if (routed->empty()) return then(okSoFar);
    target_.route->acceptRouted(target_.destinationId, *routed, [this, alive, routed, then, okSoFar](
                                          Result<std::vector<store::RoutedMessage>> r) {
      if (!*alive) return;
      if (!r) {
        logWith(spdlog::level::err, fields(),
                "{}/{}: storing {} routed message(s) failed: {}; they will be routed again",
                target_.interfaceName, target_.destinationName, routed->size(),
                r.error().message);
        return then(false);
      }
      // The target's lanes of every routed source, not only of those this
      // statement stored: a killed engine's leftover connection may have
      // stored them after our start (its statement outlives it), and no one
      // else tells the target they are there; they would wait for the
      // engine's sweep. A lane with nothing new costs one read.
      std::set<int32_t> lanes;
      for (auto& it : *routed) lanes.insert(it.partitionKey);
      // Every source, not only those this statement finished: a killed
      // engine's leftover connection may have committed the route after our
      // start-up settle, and nobody else would settle those messages.
      // Settling skips what is still pending and writes only changes.
      std::vector<store::MessageRef> refs;
      refs.reserve(routed->size());
      for (auto& it : *routed) refs.push_back(it.source);
      settle(refs);
      for (int32_t lane : lanes) target_.route->wake(lane);
      then(okSoFar);
    });
  };

  if (outcomes->empty()) return doRouted(true);
  const bool settledHere = target_.onlyDestination;
  store_.flushStatuses(
      target_.destinationId, *outcomes,
      [this, alive, outcomes, doRouted, settledHere](Result<std::vector<int64_t>> r) {
        if (!*alive) return;
        if (!r) {
          // Nothing was recorded: those messages are delivered again later
          // (at least once). Logged, since it means the store is in trouble.
          logWith(spdlog::level::err, fields(), "{}/{}: recording {} outcome(s) failed: {}",
                  target_.interfaceName, target_.destinationName, outcomes->size(),
                  r.error().message);
          return doRouted(false);
        }
        // Every finished one, not only the rows this flush changed: one it
        // found done already (a killed engine's statement that committed
        // late) may still wait for its settle.
        // Settled in the flush: only those it found done already.
        std::set<int64_t> changed;
        if (settledHere) changed.insert(r->begin(), r->end());
        std::vector<store::MessageRef> refs;
        for (auto& o : *outcomes)
          if (o.status != MessageStatus::Pending && !changed.count(o.message.id))
            refs.push_back(o.message);
        settle(refs);
        doRouted(true);
      },
      settledHere ? store::Store::Settle::InTheFlush : store::Store::Settle::Separately);
}

void DeliveryLoop::settle(const std::vector<store::MessageRef>& refs) {
  // The interface's settler, shared with its other destinations' loops: a
  // message they all finish at about the same time is settled once, and
  // one settle runs at a time (settler.h says why).
  if (!refs.empty()) target_.settler->add(refs);
}

void DeliveryLoop::stop(std::function<void()> done) {
  stopping_ = true;
  stopDone_ = std::move(done);
  if (phase_ == Phase::Idle || phase_ == Phase::Windowing || phase_ == Phase::Parked ||
      phase_ == Phase::BackingOff) {
    uv_timer_stop(timer_.get());
    auto alive = alive_;
    enter(Phase::Flushing);
    flush([this, alive](bool) {
      if (*alive) maybeStopped();
    });
    return;
  }
  if (phase_ == Phase::Working && backpressure_ == Backpressure::None) {
    // Waiting for a transform: stop at the message in hand.
    uv_timer_stop(timer_.get());
    next();
  }
  // Reading / Flushing / a send in flight: maybeStopped() runs when done.
}

void DeliveryLoop::hold(Hold why) {
  bool already = holds_ != 0;
  holds_ |= static_cast<uint8_t>(why);
  if (already || stopping_ || phase_ == Phase::Stopped) return;
  switch (phase_) {
    case Phase::Idle:
    case Phase::Windowing:
    case Phase::BackingOff:
      return park();
    case Phase::Working:
      if (backpressure_ == Backpressure::RateLimit) {  // the wait would only delay the hold
        uv_timer_stop(timer_.get());
        backpressure_ = Backpressure::None;
      }
      return next();  // ends at the message in hand, flushes, parks
    default:
      return;  // reading or flushing: parks when that is done
  }
}

void DeliveryLoop::release(Hold why) {
  holds_ &= static_cast<uint8_t>(~static_cast<uint8_t>(why));
  if (holds_ || stopping_ || phase_ == Phase::Stopped) return;
  // Parked: read now, whether or not a wake came meanwhile (the safety
  // net's read was skipped too). Not after the wake window: that gathers
  // messages arriving together, and these have been waiting all along (a
  // handover's pause was 10 ms longer for it). Still finishing what it had
  // in hand: that path goes on as if never held, and reads again after it.
  // Except when its lanes were seen empty and nothing woke it since: every
  // loop of the engine is held at start until the pauses are read, and
  // 1,001 destinations with nothing waiting then read 1,001 empty queues.
  if (phase_ == Phase::Parked && emptySeen_ && !wakeAgain_) return enter(Phase::Idle);
  if (phase_ == Phase::Parked || phase_ == Phase::Idle || phase_ == Phase::Windowing) return read();
  wakeAgain_ = true;
}

void DeliveryLoop::park() {
  items_.clear();
  pos_ = 0;
  generation_.reset();  // outcomes of transforms still running are ignored
  enter(Phase::Parked);
  if (stopping_) maybeStopped();
}

void DeliveryLoop::maybeStopped() {
  enter(Phase::Stopped);  // no-op once there
  if (backgroundFlushes_ > 0) return;  // the last one calls again
  if (auto d = std::move(stopDone_)) d();
}

}  // namespace ductus::delivery
