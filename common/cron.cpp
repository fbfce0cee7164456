#include "common/cron.h"

#include "common/text.h"

#include <array>
#include <cctype>
#include <charconv>
#include <ctime>
#include <optional>
#include <vector>

namespace ductus {
namespace {

struct FieldSpec {
  const char* name;
  int min;
  int max;
  const char* const* names;  // names[i] is value min + i; nullptr if none
};

const char* const kMonthNames[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                   "jul", "aug", "sep", "oct", "nov", "dec"};
const char* const kDayNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun"};

const FieldSpec kFields[5] = {
    {"minute", 0, 59, nullptr},     {"hour", 0, 23, nullptr},
    {"day of month", 1, 31, nullptr}, {"month", 1, 12, kMonthNames},
    {"day of week", 0, 7, kDayNames},
};

bool parseValue(std::string_view s, const FieldSpec& spec, int& out) {
  if (spec.names) {
    std::string l = asciiLower(s);
    for (int i = 0; i <= spec.max - spec.min; ++i)
      if (l == spec.names[i]) {
        out = spec.min + i;
        return true;
      }
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size() && out >= spec.min &&
         out <= spec.max;
}

// Sets bits [value - spec.min] for every value the field names.
Result<std::vector<bool>> parseField(std::string_view text, const FieldSpec& spec) {
  std::vector<bool> bits(spec.max - spec.min + 1, false);
  auto bad = [&](std::string_view why) {
    return Error{std::string("cron ") + spec.name + " field \"" + std::string(text) + "\": " +
                 std::string(why)};
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (item.empty()) return bad("empty list item");

    int step = 1;
    bool stepped = false;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      std::string_view s = item.substr(slash + 1);
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
      if (s.empty() || ec != std::errc() || p != s.data() + s.size() || step < 1 ||
          step > spec.max - spec.min + 1)
        return bad("step \"" + std::string(s) + "\" is not a number in range");
      item = item.substr(0, slash);
      stepped = true;
    }
    int lo, hi;
    if (item == "*") {
      lo = spec.min;
      hi = spec.max;
    } else if (size_t dash = item.find('-'); dash != std::string_view::npos) {
      if (!parseValue(item.substr(0, dash), spec, lo) || !parseValue(item.substr(dash + 1), spec, hi))
        return bad("\"" + std::string(item) + "\" is not a range of " + std::to_string(spec.min) +
                   "-" + std::to_string(spec.max));
      // "sat-sun": Sunday at the end of a range is 7, not 0.
      if (spec.max == 7 && hi == 0) hi = 7;
      if (lo > hi) return bad("range \"" + std::string(item) + "\" runs backwards");
    } else {
      if (!parseValue(item, spec, lo))
        return bad("\"" + std::string(item) + "\" is not a value of " + std::to_string(spec.min) +
                   "-" + std::to_string(spec.max));
      // "a/n" means a, a+n, ... up to the maximum, as in Vixie cron.
      hi = stepped ? spec.max : lo;
    }
    for (int v = lo; v <= hi; v += step) bits[v - spec.min] = true;
  }
  return bits;
}

bool isLeap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int daysIn(int year, int mon0) {
  static const int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return mon0 == 1 && isLeap(year) ? 29 : kDays[mon0];
}

// Day of week (0 = Sunday) for a Gregorian date; Sakamoto's method.
int weekday(int year, int mon0, int mday) {
  static const int t[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  if (mon0 < 2) year -= 1;
  return (year + year / 4 - year / 100 + year / 400 + t[mon0] + mday) % 7;
}

std::string_view expandMacro(std::string_view text) {
  if (text == "@yearly" || text == "@annually") return "0 0 1 1 *";
  if (text == "@monthly") return "0 0 1 * *";
  if (text == "@weekly") return "0 0 * * 0";
  if (text == "@daily" || text == "@midnight") return "0 0 * * *";
  if (text == "@hourly") return "0 * * * *";
  return {};
}

}  // namespace

Result<Cron> parseCron(std::string_view text) {
  std::string_view expr = text;
  while (!expr.empty() && std::isspace(static_cast<unsigned char>(expr.front()))) expr.remove_prefix(1);
  while (!expr.empty() && std::isspace(static_cast<unsigned char>(expr.back()))) expr.remove_suffix(1);
  if (!expr.empty() && expr.front() == '@') {
    std::string_view expanded = expandMacro(expr);
    if (expanded.empty()) return Error{"unknown cron macro \"" + std::string(expr) + "\""};
    expr = expanded;
  }

  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < expr.size()) {
    while (i < expr.size() && std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
    size_t s = i;
    while (i < expr.size() && !std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
    if (i > s) fields.push_back(expr.substr(s, i - s));
  }
  if (fields.size() != 5)
    return Error{"cron expression \"" + std::string(text) + "\" has " +
                 std::to_string(fields.size()) +
                 " fields; expected 5 (minute hour day-of-month month day-of-week)"};

  Cron c;
  c.text_ = std::string(text);
  std::array<std::vector<bool>, 5> bits;
  for (int f = 0; f < 5; ++f) {
    auto r = parseField(fields[f], kFields[f]);
    if (!r) return r.error();
    bits[f] = std::move(*r);
  }
  for (int v = 0; v < 60; ++v) c.minutes_[v] = bits[0][v];
  for (int v = 0; v < 24; ++v) c.hours_[v] = bits[1][v];
  for (int v = 1; v <= 31; ++v) c.daysOfMonth_[v] = bits[2][v - 1];
  for (int v = 0; v < 12; ++v) c.months_[v] = bits[3][v];
  for (int v = 0; v <= 7; ++v)
    if (bits[4][v]) c.daysOfWeek_[v % 7] = true;
  // Vixie cron's DOM_STAR / DOW_STAR: a field that starts with '*' (even
  // "*/2") leaves the day to the other field.
  c.domStar_ = fields[2].front() == '*';
  c.dowStar_ = fields[4].front() == '*';

  if (c.dowStar_) {  // only day of month decides
    bool possible = false;
    for (int m = 0; m < 12 && !possible; ++m) {
      if (!c.months_[m]) continue;
      for (int d = 1; d <= daysIn(2000, m) && !possible; ++d) possible = c.daysOfMonth_[d];
    }
    if (!possible)
      return Error{"cron expression \"" + std::string(text) +
                   "\" names no day that exists in its months, so it never fires"};
  }
  return c;
}

namespace {

// The earliest instant after `base` that is the local time year-mon-day
// hour:min: none when the clock skipped it (spring forward), and of the two
// a repeated hour has (fall back), the earlier one still after `base`.
// mktime is asked with each tm_isdst and its answer converted back, since
// with tm_isdst = -1 it resolves a repeated hour by a guess kept from its
// earlier calls: the same schedule would fire at different times.
std::optional<std::time_t> firstInstantAfter(int year, int mon, int day, int hour, int min,
                                             std::time_t base) {
  std::optional<std::time_t> first;
  for (int isdst : {0, 1}) {
    std::tm cand{};
    cand.tm_year = year - 1900;
    cand.tm_mon = mon;
    cand.tm_mday = day;
    cand.tm_hour = hour;
    cand.tm_min = min;
    cand.tm_isdst = isdst;
    std::time_t t = std::mktime(&cand);
    std::tm back{};
    if (t == -1 || !localtime_r(&t, &back)) continue;
    bool same = back.tm_year == year - 1900 && back.tm_mon == mon && back.tm_mday == day &&
                back.tm_hour == hour && back.tm_min == min && (back.tm_isdst > 0) == (isdst > 0);
    if (same && t > base && (!first || t < *first)) first = t;
  }
  return first;
}

}  // namespace

bool Cron::dayMatches(int mday, int mon0, int wday) const {
  bool dom = daysOfMonth_[mday];
  bool dow = daysOfWeek_[wday];
  if (domStar_ || dowStar_) return dom && dow;
  return dom || dow;
}

std::chrono::system_clock::time_point Cron::next(std::chrono::system_clock::time_point after) const {
  using std::chrono::system_clock;
  std::time_t base = system_clock::to_time_t(after);
  if (system_clock::from_time_t(base) > after) --base;  // to_time_t may round up
  std::tm now{};
  localtime_r(&base, &now);

  // Walk the local calendar field by field; only a candidate that matches
  // every field is converted back with mktime.
  int year = now.tm_year + 1900, mon = now.tm_mon, day = now.tm_mday, hour = now.tm_hour,
      min = now.tm_min + 1;
  auto carry = [&] {
    if (min > 59) { min = 0; ++hour; }
    if (hour > 23) { hour = 0; ++day; }
    if (day > daysIn(year, mon)) { day = 1; ++mon; }
    if (mon > 11) { mon = 0; ++year; }
  };
  carry();
  // Eight years covers every leap-day schedule; the bound only guards
  // against a bug turning into an endless loop.
  for (int guard = 0; guard < 8 * 366 * 24 * 2 + 100000; ++guard) {
    if (!months_[mon]) {
      ++mon;
      day = 1, hour = 0, min = 0;
      if (mon > 11) { mon = 0; ++year; }
      continue;
    }
    if (!dayMatches(day, mon, weekday(year, mon, day))) {
      ++day;
      hour = 0, min = 0;
      carry();
      continue;
    }
    if (!hours_[hour]) {
      ++hour;
      min = 0;
      carry();
      continue;
    }
    if (!minutes_[min]) {
      ++min;
      carry();
      continue;
    }
    if (auto t = firstInstantAfter(year, mon, day, hour, min, base))
      return system_clock::from_time_t(*t);
    ++min;
    carry();
  }
  return system_clock::time_point::max();
}

}  // namespace ductus
