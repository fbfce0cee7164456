// Durations ("250ms", "5s", "10m", "1h", "1d") and sizes ("512KB", "64MB")
// as written in project files. A number always carries its unit: a bare "5"
// could be seconds or milliseconds, and guessing wrong is a silent outage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/config/model.h"
#include "common/duration_text.h"

namespace ductus::config {

// nullopt for anything but <whole number><ms|s|m|h|d>.
std::optional<Duration> parseDuration(std::string_view text);

// Sizes in binary multiples: B, KB (1024), MB, GB. nullopt otherwise.
std::optional<uint64_t> parseSize(std::string_view text);

// "5s", "250ms", "10m": the shortest exact form, for summaries (in common/
// so the network core can say its limits without including config/).
using ductus::formatDuration;

}  // namespace ductus::config
