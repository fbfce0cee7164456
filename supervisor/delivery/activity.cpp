#include "supervisor/delivery/activity.h"

#include <algorithm>

#include "common/config/duration.h"
#include "common/log.h"

namespace ductus::delivery {

void Moment::markNow() {
  mark(std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
           .count());
}

namespace {

int64_t load(const std::atomic<int64_t>& c) { return c.load(std::memory_order_relaxed); }

DestinationCounts minus(const DestinationCounts& now, const DestinationCounts* before) {
  DestinationCounts d = now;
  if (!before) return d;
  d.sent -= before->sent;
  d.filtered -= before->filtered;
  d.quarantined -= before->quarantined;
  d.routed -= before->routed;
  d.retries -= before->retries;
  return d;
}

// Something happened, or messages wait (moving or stuck: either is news).
bool changed(const DestinationCounts& d) {
  return d.sent || d.filtered || d.quarantined || d.routed || d.retries ||
         (d.waiting && *d.waiting > 0);
}

// "3 sent, 1 filtered, 0 quarantined" (a route: "3 routed, ..."), and the
// retries when there were any.
std::string outcomes(const DestinationCounts& d) {
  std::string s = d.route ? std::to_string(d.routed) + " routed, "
                          : std::to_string(d.sent) + " sent, ";
  s += std::to_string(d.filtered) + " filtered, " + std::to_string(d.quarantined) + " quarantined";
  if (d.retries) s += ", " + std::to_string(d.retries) + " retried";
  if (d.waiting) s += ", " + std::to_string(*d.waiting) + " waiting";
  return s;
}

}  // namespace

std::vector<InterfaceCounts> ActivityCounters::snapshot() const {
  std::vector<InterfaceCounts> out;
  out.reserve(interfaces_.size());
  for (const auto& i : interfaces_) {
    InterfaceCounts c{i.name, load(i.received), load(i.duplicates), {}};
    c.destinations.reserve(i.destinations.size());
    for (const auto& d : i.destinations)
      c.destinations.push_back(DestinationCounts{d.name, d.route, load(d.sent), load(d.filtered),
                                                 load(d.quarantined), load(d.routed),
                                                 load(d.retries), d.destinationId, std::nullopt});
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ActivityLine> summarize(const std::vector<InterfaceCounts>& before,
                                    const std::vector<InterfaceCounts>& now,
                                    std::string_view period) {
  std::vector<ActivityLine> lines;
  for (size_t i = 0; i < now.size(); ++i) {
    const InterfaceCounts* b = i < before.size() ? &before[i] : nullptr;
    InterfaceCounts c{now[i].name, now[i].received, now[i].duplicates, {}};
    if (b) {
      c.received -= b->received;
      c.duplicates -= b->duplicates;
    }
    bool any = c.received || c.duplicates;
    for (size_t j = 0; j < now[i].destinations.size(); ++j) {
      const DestinationCounts* bd =
          b && j < b->destinations.size() ? &b->destinations[j] : nullptr;
      c.destinations.push_back(minus(now[i].destinations[j], bd));
      any = any || changed(c.destinations.back());
    }
    if (!any) continue;
    std::string text = c.name + " in the last " + std::string(period) + ": " +
                       std::to_string(c.received) + " received";
    if (c.duplicates)
      text += " (" + std::to_string(c.duplicates) + (c.duplicates == 1 ? " duplicate)" : " duplicates)");
    // One destination: its counts are the interface's. More: each its own.
    if (c.destinations.size() == 1) {
      text += ", " + outcomes(c.destinations.front());
    } else {
      for (const auto& d : c.destinations) text += "; " + d.name + ": " + outcomes(d);
    }
    lines.push_back(ActivityLine{std::move(c), std::move(text)});
  }
  return lines;
}

ActivityReporter::ActivityReporter(uv_loop_t* loop, const ActivityCounters& counters,
                                   std::chrono::milliseconds every, WaitingCounts waiting)
    : counters_(counters),
      waiting_(std::move(waiting)),
      period_(every == std::chrono::minutes(1) ? "minute" : config::formatDuration(every)),
      last_(counters.snapshot()),
      timer_(makeTimer(loop, this)) {
  auto ms = static_cast<uint64_t>(std::max<int64_t>(1, every.count()));
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<ActivityReporter*>(t->data)) self->report();
      },
      ms, ms);
}

void ActivityReporter::report() {
  auto now = counters_.snapshot();
  if (!waiting_) return log(std::move(now));
  if (asking_) return;
  asking_ = true;
  auto alive = alive_;
  waiting_([this, alive, now = std::move(now)](
               std::optional<std::map<int64_t, int64_t>> counts) mutable {
    if (!*alive) return;
    asking_ = false;
    if (counts)
      for (auto& i : now)
        for (auto& d : i.destinations) {
          if (!d.destinationId) continue;
          auto it = counts->find(d.destinationId);
          d.waiting = it == counts->end() ? 0 : it->second;
        }
    log(std::move(now));
  });
}

void ActivityReporter::log(std::vector<InterfaceCounts> now) {
  for (const auto& line : summarize(last_, now, period_)) {
    const InterfaceCounts& c = line.change;
    int64_t sent = 0, filtered = 0, quarantined = 0, routed = 0, retries = 0, waiting = 0;
    for (const auto& d : c.destinations) {
      sent += d.sent;
      filtered += d.filtered;
      quarantined += d.quarantined;
      routed += d.routed;
      retries += d.retries;
      waiting += d.waiting.value_or(0);
    }
    logWith(spdlog::level::info,
            LogFields{c.name, {}, 0,
                      {{"received", c.received},
                       {"duplicates", c.duplicates},
                       {"sent", sent},
                       {"filtered", filtered},
                       {"quarantined", quarantined},
                       {"routed", routed},
                       {"retries", retries},
                       {"waiting", waiting}}},
            "{}", line.text);
  }
  last_ = std::move(now);
}

}  // namespace ductus::delivery
