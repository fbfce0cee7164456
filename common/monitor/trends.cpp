#include "common/monitor/trends.h"

#include <cmath>
#include <ctime>

namespace ductus::monitor {

int hourOfWeek(TimePoint t) {
  std::time_t s = Clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&s, &tm);
  return tm.tm_wday * 24 + tm.tm_hour;
}

void Window::add(const Sample& s) {
  if (!samples_.empty()) {
    const Sample& last = samples_.back();
    if (s.at < last.at || s.received < last.received || s.finished < last.finished ||
        s.sends < last.sends)
      samples_.clear();
  }
  samples_.push_back(s);
  while (samples_.size() > 1 && s.at - samples_.front().at > span_) samples_.pop_front();
}

Rates Window::rates() const {
  Rates r;
  if (samples_.size() < 2) return r;
  const Sample& a = samples_.front();
  const Sample& b = samples_.back();
  double minutes = std::chrono::duration<double>(b.at - a.at).count() / 60.0;
  if (minutes <= 0) return r;
  r.minutes = minutes;
  r.inPerMinute = static_cast<double>(b.received - a.received) / minutes;
  r.outPerMinute = static_cast<double>(b.finished - a.finished) / minutes;
  if (b.sends > a.sends)
    r.sendMs = (b.sendSeconds - a.sendSeconds) * 1000.0 / static_cast<double>(b.sends - a.sends);
  return r;
}

void Baseline::learn(int hour, double value) {
  if (hour < 0 || hour >= kHours || !std::isfinite(value) || value < 0) return;
  if (values_.empty()) values_.resize(kHours);
  auto& v = values_[static_cast<size_t>(hour)];
  v = v ? *v + kLearnRate * (value - *v) : value;
}

std::optional<double> Baseline::at(int hour) const {
  if (hour < 0 || hour >= kHours || values_.empty()) return std::nullopt;
  return values_[static_cast<size_t>(hour)];
}

std::vector<std::optional<double>> Baseline::values() const {
  if (values_.empty()) return std::vector<std::optional<double>>(kHours);
  return values_;
}

Baseline Baseline::fromValues(const std::vector<std::optional<double>>& values) {
  Baseline b;
  if (values.size() != kHours) return b;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] && std::isfinite(*values[i]) && *values[i] >= 0) {
      if (b.values_.empty()) b.values_.resize(kHours);
      b.values_[i] = values[i];
    }
  return b;
}

std::optional<HourLearner::Learned> HourLearner::feed(const Sample& s) {
  int hour = hourOfWeek(s.at);
  if (!hour_ || s.at < last_.at || s.received < last_.received || s.sends < last_.sends) {
    hour_ = hour;
    first_ = last_ = s;
    return std::nullopt;
  }
  if (hour == *hour_) {
    last_ = s;
    return std::nullopt;
  }
  // The hour turned: what the one that ended did, from its first sample
  // to its last, if enough of it was watched.
  std::optional<Learned> out;
  auto watched = last_.at - first_.at;
  if (watched >= enough_) {
    double minutes = std::chrono::duration<double>(watched).count() / 60.0;
    Learned l;
    l.hour = *hour_;
    l.inPerMinute = static_cast<double>(last_.received - first_.received) / minutes;
    if (last_.sends > first_.sends)
      l.sendMs = (last_.sendSeconds - first_.sendSeconds) * 1000.0 /
                 static_cast<double>(last_.sends - first_.sends);
    out = l;
  }
  hour_ = hour;
  first_ = last_ = s;
  return out;
}

}  // namespace ductus::monitor
