// The names of states and severities as the project and the API write them.
#include "common/monitor/settings.h"

namespace ductus::monitor {

std::optional<State> parseState(std::string_view text) {
  for (auto s : {State::Stopped, State::Paused, State::Stalled, State::Error, State::Behind,
                 State::IntakeStopped, State::Late, State::Quiet, State::Expiring, State::Ok})
    if (stateName(s) == text) return s;
  return std::nullopt;
}

std::optional<Severity> parseSeverity(std::string_view text) {
  for (auto s : {Severity::Info, Severity::Warning, Severity::Critical})
    if (severityName(s) == text) return s;
  return std::nullopt;
}

}  // namespace ductus::monitor
