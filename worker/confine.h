// Confines the calling worker process: no capabilities (even as root), no
// new privileges, no core dumps, an address-space limit, and a seccomp
// allowlist. Called once, after the V8
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

// Every capability gone, even when the engine runs as root (it should
// not: the package's unit runs it as `ductus`): a worker needs none, and a
// root worker that escaped V8 would otherwise hold them all. The effective,
// permitted and inheritable sets are emptied, the ambient set cleared, the
// bounding set emptied and the securebits locked so that uid 0 means
// nothing special any more (SECBIT_NOROOT) should an exec ever get through.
// The bounding set and the securebits need CAP_SETPCAP: a process without
// it (the engine as an ordinary user) can't change them, and can gain
// nothing from them either (no_new_privs, and execve is refused).
// Capabilities belong to each thread, and a new thread copies its
// creator's: the worker calls this when worker mode starts, before V8
// starts its threads; confineProcess calls it again for the caller.
Status dropCapabilities();

// Closes every descriptor but 0, 1, 2 and `keep` (the worker's socket):
// whatever the shell that started the engine left open without
// close-on-exec (`exec 7</etc/passwd; ductus run`) is inherited through
// fork and exec, and a script that escaped V8 could read or write it even
// under seccomp. Called when worker mode starts and again just before
// confinement (V8 keeps no descriptor of its own open: its ICU data is in
// the binary, and what it opens while starting it closes).
Status closeDescriptorsExcept(int keep);

}  // namespace ductus::worker
