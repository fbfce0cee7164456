// Ports on 127.0.0.1 for tests that cannot bind port 0 themselves and pass
// the socket on: an engine run from a project yaml needs its listen port
// written down before it starts (and the same port again after a kill -9).
#pragma once

#include <cstdint>

#include "common/fd.h"

namespace ductus::test {

// A port nothing listens on right now, for an engine to bind after this
// returns. It comes from below the kernel's ephemeral range, where bind(0)
// and outgoing connections never take theirs, from a stretch of its own per
// process, and is never handed out twice by one process.
uint16_t freePort();

// Whether something accepts TCP connections on 127.0.0.1:port now (a
// server started by a test is ready; a stopped one has let go of it).
bool accepts(uint16_t port);

// A socket bound to 127.0.0.1 (a port of the kernel's) that does not
// listen: connections to it are refused, and no one else can listen there
// while it is held. listen() on it later to open the port.
Fd closedPort(uint16_t* port);

}  // namespace ductus::test
