// Rates and their normal: what a destination did in the last 5 minutes,
// and what it does in this hour of the week, learned. The diagnosis
// compares the two to name a cause (a burst, a slow receiver). Pure: the
// caller samples its counters every few seconds and gives the times.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "common/monitor/settings.h"

namespace ductus::monitor {

// The hour of the week in local time: 0 is Sunday 00:00-01:00, 167
// Saturday 23:00-24:00.
int hourOfWeek(TimePoint t);

// A destination's counters at one moment, cumulative since the engine
// started: messages received by its interface, messages it finished
// (sent, filtered, routed, quarantined), sends and their total time.
struct Sample {
  TimePoint at{};
  int64_t received = 0, finished = 0, sends = 0;
  double sendSeconds = 0;
};

struct Rates {
  double inPerMinute = 0, outPerMinute = 0;
  std::optional<double> sendMs;  // mean of the sends in the window; none without one
  double minutes = 0;            // the window's span
};

// The last `span` of samples (5 minutes by default).
class Window {
 public:
  explicit Window(Seconds span = Seconds(300)) : span_(span) {}
  // A sample older than the last one, or counters that went back (a
  // restart of the counting), starts the window over.
  void add(const Sample& s);
  Rates rates() const;
  size_t size() const { return samples_.size(); }

 private:
  Seconds span_;
  std::deque<Sample> samples_;
};

// A value per hour of the week, learned: each hour moves 30 % of the way
// to the newest value (the first value is taken as it is).
class Baseline {
 public:
  static constexpr int kHours = 168;
  static constexpr double kLearnRate = 0.3;
  void learn(int hour, double value);
  std::optional<double> at(int hour) const;
  // As the store keeps it: 168 entries, none where nothing was learned.
  std::vector<std::optional<double>> values() const;
  // From the store's entries; anything but 168 finite values is ignored
  // where it doesn't fit (a short or hostile array learns nothing).
  static Baseline fromValues(const std::vector<std::optional<double>>& values);

 private:
  // Empty until the first value is learned (or 168 entries): an engine with
  // 1,001 destinations, most never learned, held 5 MB of empty hours,
  // touched page by page at start-up.
  std::vector<std::optional<double>> values_;
};

// Notices the hour of the week turning in the samples it is fed and says
// what the hour just ended did, if at least `enough` of it was watched.
class HourLearner {
 public:
  struct Learned {
    int hour = 0;
    double inPerMinute = 0;
    std::optional<double> sendMs;
  };
  explicit HourLearner(Seconds enough = Seconds(15 * 60)) : enough_(enough) {}
  std::optional<Learned> feed(const Sample& s);

 private:
  Seconds enough_;
  std::optional<int> hour_;
  Sample first_, last_;
};

}  // namespace ductus::monitor
