// Process-wide V8 setup. A worker process calls initV8() once, before making
// its isolate; the platform lives until the process exits.
#pragma once

#include "common/result.h"

namespace ductus::worker {

Status initV8(const char* argv0);

}  // namespace ductus::worker
