// Who calls when ductusctl asks: the control socket (supervisor/
// control_socket.h) has checked the peer's uid with SO_PEERCRED (the
// engine's own, or root) and hands the request to a Router of its own,
// never reachable from the network, naming the peer's account in a header.
// That person owns the engine's files and process already, so they act as
// an admin with every permission; the audit log names them `local:<user>`,
// via `control`.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "api/route.h"

namespace ductus::api {

// The header the control socket sets on the requests it makes; any other
// request (none reaches this router) has no caller.
inline constexpr const char* kLocalUserHeader = "x-ductus-local-user";

// local:<user>: an admin with payloads and audit, via Local.
Caller localCaller(const std::string& osUser);

class LocalAuthenticator : public Authenticator {
 public:
  void identify(const net::HttpRequest& request,
                std::function<void(Result<std::optional<Caller>>)> done) override;
};

}  // namespace ductus::api
