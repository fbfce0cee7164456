// A duration as people write it in ductus.yaml and read it in the log
// ("5s", "250ms", "10m"). Here, not in config/, because the network core
// says its limits in log lines too and includes nothing of config/
// (scripts/check-includes.sh).
#pragma once

#include <chrono>
#include <string>

namespace ductus {

// The shortest exact form: whole days, hours, minutes or seconds if the
// value is one, milliseconds otherwise.
std::string formatDuration(std::chrono::milliseconds d);

}  // namespace ductus
