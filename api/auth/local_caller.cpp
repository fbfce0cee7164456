#include "api/auth/local_caller.h"

namespace ductus::api {

Caller localCaller(const std::string& osUser) {
  Caller c;
  c.via = Via::Local;
  c.name = "local:" + osUser;
  c.role = Role::Admin;
  c.permissions = kPayloads | kAudit;
  c.address = "control socket";
  return c;
}

void LocalAuthenticator::identify(const net::HttpRequest& request,
                                  std::function<void(Result<std::optional<Caller>>)> done) {
  auto user = request.header(kLocalUserHeader);
  if (!user || user->empty()) return done(std::optional<Caller>());
  done(std::optional<Caller>(localCaller(std::string(*user))));
}

}  // namespace ductus::api
