// What the API's tests share: an ApiServer on a loop thread, on
// 127.0.0.1 with a port of the kernel's, spoken to over real HTTP, and a
// fake Authenticator whose callers are written in the request itself.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/api_server.h"
#include "api/route.h"
#include "tests/support/http_client.h"
#include "tests/support/loop_thread.h"

namespace ductus::api::test {

// "Authorization: Bearer ROLE[+payloads][+audit]" is a token of that role;
// "Cookie: ductus_session=ROLE..." the same as a browser session; "Bearer
// wrong" is refused, "Bearer down" can't be checked (ErrorKind::Unavailable). A
// bearer starting "later-" is answered on a later turn of the loop, as a
// real authenticator asking the database does.
class FakeAuthenticator : public Authenticator {
 public:
  explicit FakeAuthenticator(uv_loop_t* loop) : loop_(loop) {}

  void identify(const net::HttpRequest& request,
                std::function<void(Result<std::optional<Caller>>)> done) override {
    ++calls;
    std::string who;
    Via via = Via::Token;
    if (auto a = request.header("authorization"); a && a->rfind("Bearer ", 0) == 0) {
      who = std::string(a->substr(7));
    } else if (auto c = request.header("cookie"); c && c->rfind("ductus_session=", 0) == 0) {
      who = std::string(c->substr(15));
      via = Via::Session;
    } else {
      return done(std::optional<Caller>());
    }
    if (who == "wrong") return done(Error{"no such token"});
    if (who == "down") return done(Error{"the database is down", ErrorKind::Unavailable});
    bool later = who.rfind("later-", 0) == 0;
    if (later) who = who.substr(6);
    Caller c;
    c.via = via;
    c.name = who;
    std::string role = who.substr(0, who.find('+'));
    c.role = roleFromName(role).value_or(Role::Viewer);
    if (who.find("+payloads") != std::string::npos) c.permissions |= kPayloads;
    if (who.find("+audit") != std::string::npos) c.permissions |= kAudit;
    if (!later) return done(std::optional<Caller>(c));
    ductus::test::LoopThread::after(loop_, 5, [done, c] { done(std::optional<Caller>(c)); });
  }

  int calls = 0;  // on the loop thread only

 private:
  uv_loop_t* loop_;
};

// The body of an error answer, parsed; {"error": null} when it is not one.
inline nlohmann::json errorOf(const ductus::test::HttpReply& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error") || !j.contains("message"))
    return nlohmann::json{{"error", nullptr}};
  return j;
}

class ApiHarness {
 public:
  ApiHarness() : auth_(std::make_unique<FakeAuthenticator>(loop_.loop())) {}
  ~ApiHarness() { stop(); }

  // Starts the server on these routes; false (with the reason) if refused.
  // `requestTimes`: the server's answer times (ApiServerOptions).
  // `ui`: the console's files on every other path (ApiServerOptions).
  Status start(std::vector<Route> routes, Histogram* requestTimes = nullptr,
               const UiTable* ui = &embeddedUi()) {
    Status out;
    loop_.run([&] {
      ApiServerOptions o;
      o.port = 0;
      o.requestTimes = requestTimes;
      o.ui = ui;
      auto s = ApiServer::start(loop_.loop(), o, std::move(routes), auth_.get());
      if (!s) {
        out = s.error();
        return;
      }
      server_ = std::move(*s);
      port_ = server_->port();
    });
    return out;
  }

  void stop() {
    loop_.run([&] {
      if (!server_) return;
      server_->close([] {});
    });
    // The close callbacks run on the loop; the server goes after them.
    loop_.run([&] { server_.reset(); });
  }

  // One request on a connection of its own.
  ductus::test::HttpReply call(const std::string& method, const std::string& path,
                               const std::map<std::string, std::string>& headers = {},
                               const std::string& body = {}) {
    auto c = ductus::test::HttpClient::connect(port_);
    if (!c) {
      ADD_FAILURE() << c.error().message;
      return {};
    }
    auto r = c->request(method, path, body, headers);
    if (!r) {
      ADD_FAILURE() << method << " " << path << ": " << r.error().message;
      return {};
    }
    return *r;
  }
  ductus::test::HttpReply get(const std::string& path,
                              const std::map<std::string, std::string>& headers = {}) {
    return call("GET", path, headers);
  }

  uint16_t port() const { return port_; }
  ductus::test::LoopThread& loop() { return loop_; }
  FakeAuthenticator& auth() { return *auth_; }
  ApiServer& server() { return *server_; }

 private:
  ductus::test::LoopThread loop_;
  std::unique_ptr<FakeAuthenticator> auth_;
  std::unique_ptr<ApiServer> server_;
  uint16_t port_ = 0;
};

inline std::map<std::string, std::string> bearer(const std::string& who) {
  return {{"Authorization", "Bearer " + who}};
}

}  // namespace ductus::api::test
