// The worker's side of its socket: frames in (load, invoke, service reply,
// run tests, shutdown), frames out (ready, loaded, outcome, service
// request, log). Blocking reads are fine here: the worker is its own
// process with nothing else to do; poll() only adds a timeout for calls
// waiting on services past their deadline.
#pragma once

#include <cstddef>

namespace ductus::worker {

// Initializes V8, makes the isolate and the host, confines the process,
// says ready, and serves fd until the supervisor closes it or says shutdown.
// Returns the process exit code (proto/worker_exit.h).
int serveWorker(const char* argv0, int fd, size_t heapMb);

}  // namespace ductus::worker
