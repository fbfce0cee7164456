#include "api/api_server.h"

namespace ductus::api {

Result<std::unique_ptr<ApiServer>> ApiServer::start(uv_loop_t* loop, ApiServerOptions options,
                                                    std::vector<Route> routes,
                                                    Authenticator* authenticator) {
  auto router = Router::make(std::move(routes), authenticator);
  if (!router) return router.error();
  std::unique_ptr<ApiServer> self(new ApiServer());
  self->router_ = std::move(*router);
  net::HttpSettings hs;
  hs.name = "api";
  hs.limits = options.limits;
  hs.maxBodyBytes = options.maxBodyBytes;
  hs.answerTimes = options.requestTimes;
  // No browser may read an answer as another type than it says (a JSON
  // error as HTML, a payload as script).
  hs.headers = {{"X-Content-Type-Options", "nosniff"}};
  // Over HTTPS, a browser that has been here once never tries plain HTTP
  // again for a year (the console's cookie and every password stay in TLS).
  if (options.guard.tls) hs.headers.emplace_back("Strict-Transport-Security", "max-age=31536000");
  hs.guard = options.guard;
  self->http_ = std::make_unique<net::HttpServer>(loop, hs);
  Router* r = self->router_.get();
  // The router lives as long as the server, which outlives its connections.
  if (auto s = self->http_->addPrefixRoute(
          "/api/", [r](const net::HttpRequest& req, net::HttpRespond respond) {
            r->handle(req, std::move(respond));
          });
      !s)
    return s.error();
  // Everything else is the console's (api/ui/ui_assets.h), except /api
  // itself, which is the API's word for "not here".
  const UiTable* ui = options.ui;
  if (auto s = self->http_->addRoute(
          "*", [ui](const net::HttpRequest& req, net::HttpRespond respond) {
            if (req.path == "/api" || !ui)
              return respond(jsonError(404, "not_found", "no operation at " + req.path +
                                                             "; the API is under /api/v1/"));
            respond(serveUi(*ui, req));
          });
      !s)
    return s.error();
  if (auto s = options.adoptFd >= 0 ? self->http_->adopt(options.adoptFd)
                                     : self->http_->listen(options.host, options.port);
      !s)
    return Error{"the API on " + options.host + ":" + std::to_string(options.port) + ": " +
                 s.error().message};
  return self;
}

void ApiServer::close(std::function<void()> done) { http_->close(std::move(done)); }

void RefuseEveryone::identify(const net::HttpRequest& request,
                              std::function<void(Result<std::optional<Caller>>)> done) {
  bool credentials = request.header("authorization").has_value();
  if (auto cookie = request.header("cookie"); cookie && cookie->find("ductus_session=") != cookie->npos)
    credentials = true;
  if (!credentials) return done(std::optional<Caller>());
  done(Error{"sign-in is not built in this engine yet: no token or session is valid"});
}

}  // namespace ductus::api
