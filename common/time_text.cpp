#include "common/time_text.h"

#include <cstdio>
#include <ctime>

namespace ductus {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  // Before the epoch, the division rounds toward zero: keep the
  // milliseconds non-negative.
  time_t s = static_cast<time_t>(ms / 1000);
  int rest = static_cast<int>(ms % 1000);
  if (rest < 0) rest += 1000, --s;
  tm parts{};
  gmtime_r(&s, &parts);
  char buf[48];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &parts);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", rest);
  return buf;
}

}  // namespace ductus
