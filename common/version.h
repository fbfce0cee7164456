// What --version prints. The numbers come from CMakeLists.txt's project()
// and the commit from git at configure time, through common/build_info.h,
// which CMake writes into the build folder.
#pragma once

#include "common/build_info.h"

namespace ductus {
inline constexpr const char* kVersion = DUCTUS_VERSION;
// Short hash, or "unknown" when built outside a git checkout.
inline constexpr const char* kGitCommit = DUCTUS_GIT_COMMIT;
// "0.1.0 (commit 1a2b3c4)", after the binary's name.
inline constexpr const char* kVersionLine = DUCTUS_VERSION " (commit " DUCTUS_GIT_COMMIT ")";
}  // namespace ductus
