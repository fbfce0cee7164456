// One worker of the pool as `ductus status` and the API's GET /engine show
// it: a read-only view, made on request (WorkerPool::workers()).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ductus::supervisor {

struct WorkerStatus {
  std::string group;  // "shared" or the dedicated interface's name
  int slot = 0;
  pid_t pid = 0;               // 0: not running now
  const char* state = "down";  // "starting" (until ready), "running", "down"
  uint64_t restarts = 0;       // starts after the first
  size_t callsInFlight = 0;
};

}  // namespace ductus::supervisor
