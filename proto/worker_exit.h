// How a worker process ends, as both sides read it: the worker returns these
// from `ductus worker`, the supervisor tells a crash from an answer by them.
#pragma once

#include <cstdint>
#include <string>

namespace ductus::proto {

// Shut down when told, or the supervisor closed the socket.
constexpr int kExitDone = 0;
// A script failed before the worker could serve (the install probe).
constexpr int kExitScriptFailed = 1;
// The worker could not start (V8, the isolate, confinement) or its socket
// broke (a read error, a malformed frame).
constexpr int kExitBroken = 2;
// A script filled its heap: the outcomes were sent, and the process goes
// so the supervisor starts a clean one.
constexpr int kExitHeapOverflow = 3;

// How a worker ended, as a person reads it: "on signal 9", "with code 2"
// (exitStatus and termSignal as libuv reports them).
inline std::string howExited(int64_t exitStatus, int termSignal) {
  return termSignal ? "on signal " + std::to_string(termSignal)
                    : "with code " + std::to_string(exitStatus);
}

}  // namespace ductus::proto
