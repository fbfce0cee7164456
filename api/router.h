// Router: turns one HTTP request into one call of a Route's handler, or a
// JSON error. It matches the method and the path template
// ("/api/v1/interfaces/{name}": a literal segment wins over a parameter),
// decodes the path's parameters and the query string, then holds the
// caller to the route's Requirement before the handler runs:
//
//   no route for the path                      404 not_found
//   a route for the path, not for the method   405 method_not_allowed (Allow)
//   a malformed path or query, an unknown
//   query parameter                            400 bad_request
//   no credentials, or wrong or revoked ones   401 unauthenticated (WWW-Authenticate: Bearer)
//   a role or permission missing               403 forbidden
//   a browser session changing something
//   without `X-Ductus: 1`                      403 x_ductus_required
//
// Routes are checked when the router is made (checkRoutes): one without a
// stated Requirement, a duplicate operation id or method and path, a bad
// template is refused, so an unreviewed route can't be served.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/route.h"
#include "common/result.h"

namespace ductus::api {

// Bounds on what a request may ask of the router (the head as a whole is
// bounded by the HTTP server).
inline constexpr size_t kMaxParamBytes = 1024;     // one decoded path segment or query value
inline constexpr size_t kMaxQueryParams = 64;

// Every rule a route table must keep; the first broken one, naming the route.
Status checkRoutes(const std::vector<Route>& routes);

// Percent-decoding. plusIsSpace for query strings (form encoding). nullopt
// for a malformed escape or a NUL byte.
std::optional<std::string> percentDecode(std::string_view s, bool plusIsSpace);

class Router {
 public:
  // Refused unless checkRoutes passes. The authenticator may be null when
  // every route is anonymous; it must outlive the router.
  static Result<std::unique_ptr<Router>> make(std::vector<Route> routes,
                                              Authenticator* authenticator);

  // Answers still owed by the authenticator then find the router gone:
  // 503, and no handler runs on what the router's owner has freed.
  ~Router() { *alive_ = false; }
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  void handle(const net::HttpRequest& request, net::HttpRespond respond);

  const std::vector<Route>& routes() const { return *table_; }

 private:
  Router(std::shared_ptr<const std::vector<Route>> routes, Authenticator* authenticator);

  std::shared_ptr<const std::vector<Route>> table_;
  std::vector<std::vector<std::string>> segments_;  // parallel to the routes
  Authenticator* authenticator_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::api
