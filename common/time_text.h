// A moment as the API, the log and a notification write it: RFC 3339 in
// UTC with milliseconds ("2026-05-01T12:00:00.123Z").
#pragma once

#include <chrono>
#include <string>

namespace ductus {

std::string rfc3339(std::chrono::system_clock::time_point t);

}  // namespace ductus
