// ApiServer: the REST API on the supervisor's libuv loop. It owns an
// HttpServer of its own (keep-alive, the connection limits of common/net)
// whose every path under /api/ goes to the Router; every other path is
// the web console's (api/ui/ui_assets.h). Nothing it does blocks
// the loop: handlers answer through callbacks.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/route.h"
#include "api/router.h"
#include "api/ui/ui_assets.h"
#include "common/net/http_server.h"
#include "common/result.h"

namespace ductus::api {

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 7700;  // 0: any free port (tests)
  net::ConnectionLimits limits;
  // Requests are JSON of a few KB; a message edited through the API will
  // need the message limit on its own route.
  size_t maxBodyBytes = size_t{1} << 20;
  // Observes every answer's time (GET /metrics shows it as
  // ductus_http_request_seconds); null: not timed. Must outlive the server.
  Histogram* requestTimes = nullptr;
  // A listening socket to serve on instead of binding host:port (a
  // handover's new engine takes the old one's); the server owns it.
  int adoptFd = -1;
  // The console served on every path outside /api; null: a JSON 404 there.
  // Must outlive the server.
  const UiTable* ui = &embeddedUi();
  // api: { tls:, allow: }: with TLS every answer carries HSTS.
  net::ListenerGuard guard;
};

class ApiServer {
 public:
  // Checks the routes (router.h), then listens. `authenticator` must
  // outlive the server.
  static Result<std::unique_ptr<ApiServer>> start(uv_loop_t* loop, ApiServerOptions options,
                                                  std::vector<Route> routes,
                                                  Authenticator* authenticator);
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  std::string address() const { return http_->address(); }  // "127.0.0.1:7700"
  uint16_t port() const { return http_->port(); }
  int fd() const { return http_->fd(); }  // the listening socket, for a handover
  const std::vector<Route>& routes() const { return router_->routes(); }

  // Stops accepting; answers in flight are given first. `done` once every
  // connection is closed.
  void close(std::function<void()> done);

 private:
  ApiServer() = default;
  std::unique_ptr<Router> router_;
  std::unique_ptr<net::HttpServer> http_;
};

// The authenticator until sign-in exists: no credentials are ever good, so
// every operation that needs a caller answers 401.
class RefuseEveryone : public Authenticator {
 public:
  void identify(const net::HttpRequest& request,
                std::function<void(Result<std::optional<Caller>>)> done) override;
};

}  // namespace ductus::api
