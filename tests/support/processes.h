// The machine's processes as /proc shows them, for tests that look for a
// child an engine or a server started (a worker, an sshd session).
#pragma once

#include <sys/types.h>

#include <vector>

namespace ductus::test {

// The processes whose parent is `parent`.
std::vector<pid_t> childrenOf(pid_t parent);
// Every process below `pid`: its children, theirs, and so on.
std::vector<pid_t> descendantsOf(pid_t pid);

}  // namespace ductus::test
