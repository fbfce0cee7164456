#include "supervisor/monitor/traffic_rollup.h"

#include "common/log.h"
#include "supervisor/delivery/activity.h"

namespace ductus::supervisor {

namespace {

// Rows kept through failed writes: an hour of minutes. A database away
// longer loses the oldest chart minutes, never anything else.
constexpr int64_t kPendingMinutes = 60;
// A purge deletes at most this many rows a statement, once an hour.
constexpr int64_t kPurgeBatch = 50'000;
constexpr uint64_t kPurgeEveryTurns = 60;

int64_t secondsNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t load(const std::atomic<int64_t>* c) {
  return c ? c->load(std::memory_order_relaxed) : 0;
}

bool empty(const store::TrafficRow& r) {
  return !r.received && !r.sent && !r.filtered && !r.quarantined;
}

}  // namespace

// What `c` counted since the last turn, as `minute`'s row.
store::TrafficRow TrafficRollup::sinceLastTurn(const Counted& c, int64_t minute) {
  return {c.interfaceId,
          c.destinationId,
          minute,
          load(c.received) - c.lastReceived,
          load(c.sent) - c.lastSent,
          load(c.filtered) - c.lastFiltered,
          load(c.quarantined) - c.lastQuarantined};
}

// Adds a row to the one of its interface, destination and minute waiting.
void TrafficRollup::addPending(const store::TrafficRow& row) {
  auto& p = pending_[{row.interfaceId, row.destinationId, row.minute}];
  p.interfaceId = row.interfaceId, p.destinationId = row.destinationId, p.minute = row.minute;
  p.received += row.received, p.sent += row.sent, p.filtered += row.filtered,
      p.quarantined += row.quarantined;
}

TrafficRollup::TrafficRollup(uv_loop_t* loop, store::PgPool& pool, std::vector<Watched> watched,
                             std::chrono::seconds every)
    : loop_(loop), pool_(pool), every_(every.count() > 0 ? every : std::chrono::seconds(60)) {
  for (auto& w : watched) {
    if (!w.activity) continue;
    Counted intake;
    intake.interfaceId = w.interfaceId;
    intake.received = &w.activity->received;
    counted_.push_back(intake);
    for (size_t j = 0; j < w.activity->destinations.size() && j < w.destinationIds.size(); ++j) {
      if (!w.destinationIds[j]) continue;
      auto& d = w.activity->destinations[j];
      Counted c;
      c.interfaceId = w.interfaceId;
      c.destinationId = w.destinationIds[j];
      c.sent = &d.sent;
      c.filtered = &d.filtered;
      c.quarantined = &d.quarantined;
      counted_.push_back(c);
    }
  }
}

TrafficRollup::~TrafficRollup() { *alive_ = false; }

void TrafficRollup::start() {
  for (auto& c : counted_) {
    c.lastReceived = load(c.received);
    c.lastSent = load(c.sent);
    c.lastFiltered = load(c.filtered);
    c.lastQuarantined = load(c.quarantined);
  }
  timer_ = makeTimer(loop_, this);
  arm();
}

void TrafficRollup::arm() {
  // To the next multiple of `every` since the epoch, and a little past it,
  // so the minute just ended is the one the counts belong to.
  int64_t step = every_.count();
  int64_t now = secondsNow();
  int64_t next = (now / step + 1) * step;
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<TrafficRollup*>(t->data)) self->turn();
      },
      static_cast<uint64_t>(next - now) * 1000 + 100, 0);
}

void TrafficRollup::turn() {
  int64_t step = every_.count();
  // The minute that just ended.
  collect((secondsNow() / step - 1) * step);
  write([] {});
  if (++turns_ % kPurgeEveryTurns == 0) {
    store::purgeTraffic(pool_, store::kTrafficKeep, kPurgeBatch,
                        [alive = alive_](Result<int64_t> n) {
                          if (!*alive) return;
                          if (!n)
                            spdlog::warn("traffic: deleting minutes past 30 days failed: {}",
                                         n.error().message);
                        });
  }
  arm();
}

void TrafficRollup::collect(int64_t minute) {
  for (auto& c : counted_) {
    store::TrafficRow row = sinceLastTurn(c, minute);
    // The row's differences moved the baselines by exactly themselves.
    c.lastReceived += row.received, c.lastSent += row.sent, c.lastFiltered += row.filtered,
        c.lastQuarantined += row.quarantined;
    if (!empty(row)) addPending(row);
  }
  // Bounded through a long outage: the oldest minutes go first.
  int64_t oldest = minute - kPendingMinutes * every_.count();
  size_t dropped = 0;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (std::get<2>(it->first) < oldest) {
      it = pending_.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  if (dropped)
    spdlog::warn("traffic: {} rows of chart minutes older than an hour were not written "
                 "(the database did not take them); the charts miss them",
                 dropped);
}

void TrafficRollup::write(std::function<void()> then) {
  if (writing_ || pending_.empty()) return then();
  writing_ = true;
  std::vector<store::TrafficRow> rows;
  rows.reserve(pending_.size());
  for (auto& [key, row] : pending_) rows.push_back(row);
  auto sending = std::move(pending_);
  pending_.clear();
  store::addTraffic(pool_, rows, [this, alive = alive_, sending = std::move(sending),
                                  then = std::move(then)](Status s) mutable {
    if (!*alive) return then();
    writing_ = false;
    // The stop's flush waited for this write: its rows go next.
    auto finish = [this, then = std::move(then)]() mutable {
      then();
      if (auto after = std::move(afterWrite_)) {
        afterWrite_ = nullptr;
        write(std::move(after));
      }
    };
    if (s) {
      ++writes_;
      return finish();
    }
    spdlog::warn("traffic: writing {} rows of chart minutes failed ({}); tried again next "
                 "minute",
                 sending.size(), s.error().message);
    // Back with what was counted meanwhile: the same minute adds up.
    for (auto& [key, row] : sending) addPending(row);
    finish();
  });
}

std::vector<store::TrafficRow> TrafficRollup::unsaved(int64_t interfaceId) const {
  std::vector<store::TrafficRow> out;
  for (const auto& [key, row] : pending_)
    if (row.interfaceId == interfaceId) out.push_back(row);
  int64_t step = every_.count();
  int64_t minute = secondsNow() / step * step;
  for (const auto& c : counted_) {
    if (c.interfaceId != interfaceId) continue;
    store::TrafficRow row = sinceLastTurn(c, minute);
    if (!empty(row)) out.push_back(row);
  }
  return out;
}

void TrafficRollup::flushNow(std::function<void()> done) {
  if (timer_) uv_timer_stop(timer_.get());
  int64_t step = every_.count();
  collect(secondsNow() / step * step);
  // A write in flight: this one right after it, so nothing is left unsaid.
  if (writing_) {
    afterWrite_ = std::move(done);
    return;
  }
  write(std::move(done));
}

}  // namespace ductus::supervisor
