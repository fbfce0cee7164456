#pragma once

namespace ductus {
inline constexpr const char* kVersion = "0.1.0";
}
