// The text of the JavaScript SDK (sdk/ductus.js), embedded at build time by
// sdk/embed.cmake: the confined worker cannot read it from disk.
#pragma once

#include <string_view>

namespace ductus::worker {

extern const std::string_view kSdkSource;

}  // namespace ductus::worker
