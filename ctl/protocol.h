// What the engine's control socket (supervisor/control_socket.h) and
// ductusctl agree on: where the socket is when nobody says, and its limits.
// Header-only: ductusctl links neither libuv nor the engine.
//
// The protocol: one JSON object a line each way. A request names what it
// wants ({"request":"status"}); every answer has "ok", and when false an
// "error" said for people and a "code" for scripts.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <string>

namespace ductus::ctl {

inline constexpr size_t kControlMaxLine = 64 * 1024;  // a request, newline excluded
inline constexpr size_t kControlMaxConnections = 16;

// The control socket's path when --control isn't given, the same for the
// engine and ductusctl run by the same user:
//   $RUNTIME_DIRECTORY/control  systemd's RuntimeDirectory=ductus (the first
//                               one when it lists several);
//   /run/ductus/control         root without systemd;
//   $XDG_RUNTIME_DIR/ductus/control, else /tmp/ductus-UID/control: anyone
//                               else (`ductus dev` on a workstation).
inline std::string defaultControlPath() {
  if (const char* rd = std::getenv("RUNTIME_DIRECTORY"); rd && *rd) {
    std::string dir = rd;
    dir = dir.substr(0, dir.find(':'));
    return dir + "/control";
  }
  if (geteuid() == 0) return "/run/ductus/control";
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg)
    return std::string(xdg) + "/ductus/control";
  return "/tmp/ductus-" + std::to_string(geteuid()) + "/control";
}

}  // namespace ductus::ctl
