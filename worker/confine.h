// Confines the calling worker process: no new privileges, no core dumps, an
// address-space limit, and a seccomp allowlist. Called once, after the V8
// isolate exists (V8 maps its memory and starts its threads first) and
// before any interface code runs. A filter cannot be removed: every later
// syscall of every thread of the process goes through it.
#pragma once

#include <cstddef>

#include "common/result.h"

namespace ductus::worker {

struct ConfineOptions {
  // Address-space rlimit in bytes; 0 leaves it alone. Ignored in sanitizer
  // builds, whose shadow memory needs terabytes of address space.
  size_t addressSpaceBytes = 0;
};

Status confineProcess(const ConfineOptions& options);

}  // namespace ductus::worker
