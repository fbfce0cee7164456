// What a script call knows of its message besides the bytes: one type for
// delivery (which asks for the call), the worker protocol (which carries it)
// and the worker (which hands it to the SDK). It lives here, not in proto/,
// because delivery may not include proto/ (docs/architecture.md, "Folders").
#pragma once

#include <cstdint>
#include <string>

namespace ductus {

struct CallMeta {
  int64_t messageId = 0;
  int64_t receivedAtMs = 0;
  std::string destination;
  int64_t originId = 0;  // the message a route copied it from; 0 if not routed
};

}  // namespace ductus
