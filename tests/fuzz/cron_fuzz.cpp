// The cron parser: common/cron.h. Each input is an expression; one that
// parses is asked for its next firing times a few times, in a time zone with
// daylight saving time (Europe/Berlin) and from starts picked by the input
// among ordinary days, both DST changes, a leap day and a year's end.
//
// Checked beyond the sanitizers, as common/cron.h promises:
// * an expression that parses always fires again in UTC (next() gives up
//   only when Berlin's clock skips every time it names, as "0 2 29 3 */7"
//   does: 29 March is a Sunday only on the day of the spring change);
// * next(t) is strictly after t, on a whole minute;
// * no firing is skipped: from any moment between t and next(t), the next
//   firing is next(t) again (except across a DST change: see below).
#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "common/cron.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace ductus;
using std::chrono::system_clock;
using Clock = system_clock::time_point;

std::string when(Clock t) {
  if (t == Clock::max()) return "never";
  std::time_t s = system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&s, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", &tm);
  return buf;
}

bool isDst(Clock t) {
  std::time_t s = system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&s, &tm);
  return tm.tm_isdst > 0;
}

// Starting points (UTC seconds since the epoch).
const int64_t kStarts[] = {
    1767225600,  // 2026-01-01 00:00 UTC
    1774745400,  // 2026-03-29 00:50 UTC: ten minutes before Berlin springs forward
    1792886400,  // 2026-10-25 00:00 UTC: Berlin's repeated hour begins
    1792888200,  // 2026-10-25 00:30 UTC: inside the first 02:xx
    1792891800,  // 2026-10-25 01:30 UTC: inside the second 02:xx
    1835395199,  // 2028-02-28 23:59:59 UTC, the eve of a leap day
    1798761540,  // 2026-12-31 23:59 UTC
    1767225637,  // 2026-01-01 00:00:37 UTC: not on a whole minute
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("TZ", "Europe/Berlin", 1);
  tzset();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cron = parseCron(text);
  if (!cron) {
    FUZZ_CHECK(!cron.error().message.empty(), "a refusal without a message");
    return 0;
  }
  FUZZ_CHECK(cron->text() == text, "text() is not what was parsed");
  fuzz::Rng rng(text);
  Clock t = system_clock::from_time_t(kStarts[rng.below(std::size(kStarts))]);
  const std::string expr = fuzz::show(text);
  for (int i = 0; i < 3; ++i) {
    Clock n = cron->next(t);
    if (n == Clock::max()) {
      // Only a local clock's gaps may hide every firing (cron.h): in UTC,
      // which has none, the same expression fires.
      setenv("TZ", "UTC", 1);
      tzset();
      Clock utc = cron->next(t);
      setenv("TZ", "Europe/Berlin", 1);
      tzset();
      FUZZ_CHECK(utc != Clock::max(),
                 "`" + expr + "` never fires after " + when(t) + ", not even in UTC");
      return 0;
    }
    FUZZ_CHECK(n > t, "`" + expr + "`: next(" + when(t) + ") = " + when(n) + " is not after it");
    FUZZ_CHECK(system_clock::to_time_t(n) % 60 == 0, "`" + expr + "`: " + when(n) + " is not a whole minute");
    // A moment between t and n, whole seconds: its next firing is n.
    auto gap = std::chrono::duration_cast<std::chrono::seconds>(n - t).count();
    if (gap > 1) {
      Clock mid = t + std::chrono::seconds(1 + static_cast<int64_t>(rng.below(gap - 1)));
      // Near a DST change the walk is on the local calendar, as cron.h
      // says: a skipped hour never fires, and in a repeated hour a time may
      // fire in one occurrence or both, so from the first occurrence the
      // next firing can be an hour of real time away (`*/5` from 02:55
      // CEST is 03:00 CET, while from 02:30 CET it is 02:35 CET). Not
      // checked there. (next() no longer depends on mktime's earlier calls:
      // cron_test's ARepeatedHourFiresAtItsEarliestOccurrence...)
      using std::chrono::hours;
      bool dst = isDst(n);
      if (isDst(t - hours(2)) != dst || isDst(t) != dst || isDst(mid) != dst ||
          isDst(n + hours(2)) != dst) {
        t = n;
        continue;
      }
      Clock again = cron->next(mid);
      FUZZ_CHECK(again == n, "`" + expr + "`: next(" + when(t) + ") = " + when(n) + " but next(" +
                                 when(mid) + ") = " + when(again));
    }
    t = n;
  }
  return 0;
}
