// The auth and audit routes as the engine will serve them: an ApiServer on
// a loop thread with the StoreAuthenticator, over a real PostgreSQL (a
// TestDatabase, migrated) and real argon2id, spoken to over real HTTP on
// 127.0.0.1. The wall clock the auth code reads is the real one plus an
// offset the test moves.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/api_server.h"
#include "api/audit/audit_log.h"
#include "api/audit/audit_routes.h"
#include "api/auth/accounts.h"
#include "api/auth/auth_routes.h"
#include "api/auth/authenticator.h"
#include "api/auth/password_hasher.h"
#include "schema/migrator.h"
#include "schema/pg_pool.h"
#include "tests/support/http_client.h"
#include "tests/support/loop_thread.h"
#include "tests/support/test_database.h"

namespace ductus::api::test {

// An answer's body as JSON; null when it isn't JSON.
inline nlohmann::json bodyOf(const ductus::test::HttpReply& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

using Headers = std::map<std::string, std::string>;

class AuthFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = [offset = offset_] {
      return std::chrono::system_clock::now() + std::chrono::seconds(offset->load());
    };
    loop_.run([&] { pool_ = std::make_unique<store::PgPool>(loop_.loop(), db_.url(), 4); });
    auto migrated = onLoop<store::MigrateReport>([&](auto done) {
      pool_->acquire([done](Result<store::PgPool::LeasePtr> lease) {
        if (!lease) return done(lease.error());
        auto l = *lease;
        auto m = std::make_shared<store::Migrator>(l->conn(), *store::embeddedMigrations());
        m->migrate([l, m, done](Result<store::MigrateReport> r) { done(std::move(r)); });
      });
    });
    ASSERT_TRUE(migrated.ok()) << migrated.error().message;
    loop_.run([&] {
      hasher_ = std::make_unique<PasswordHasher>(loop_.loop());
      audit_ = std::make_unique<AuditLog>(*pool_, clock_);
      authenticator_ = std::make_unique<StoreAuthenticator>(*pool_, clock_);
      deps_ = std::make_unique<AuthDeps>(AuthDeps{*pool_, *hasher_, *audit_, clock_, {},
                                                  !isLoopbackHost("127.0.0.1")});
    });
    serve([&] { return auditRoutes(deps_.get()); });
  }

  // Serves the auth routes and `make`'s (made on the loop, with this
  // fixture's deps) instead of the fixture's own server (the audit
  // routes), with the same authenticator and audit log.
  void serveWith(std::function<std::vector<Route>()> make) {
    loop_.run([&] { server_->close([] {}); });
    serve(std::move(make));
  }

  void serve(std::function<std::vector<Route>()> make) {
    Status started;
    loop_.run([&] {
      server_.reset();
      auto routes = authRoutes(deps_.get());
      for (auto& r : make()) routes.push_back(std::move(r));
      ApiServerOptions o;
      o.port = 0;
      auto s = ApiServer::start(loop_.loop(), o, std::move(routes), authenticator_.get());
      if (!s) {
        started = s.error();
        return;
      }
      server_ = std::move(*s);
      port_ = server_->port();
    });
    ASSERT_TRUE(started.ok()) << started.error().message;
  }

  void TearDown() override {
    loop_.run([&] {
      if (server_) server_->close([] {});
    });
    loop_.run([&] {
      server_.reset();
      deps_.reset();
      authenticator_.reset();
      audit_.reset();
      hasher_.reset();
    });
    loop_.run([&] { pool_.reset(); });
  }

  // Runs start(done) on the loop and waits for done's answer.
  template <typename T, typename Start>
  Result<T> onLoop(Start start) {
    auto p = std::make_shared<std::promise<Result<T>>>();
    auto f = p->get_future();
    loop_.post([&, p] { start([p](Result<T> r) { p->set_value(std::move(r)); }); });
    if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
      return Error{"no answer within 30 s"};
    return f.get();
  }

  AuditEntry tester() {
    AuditEntry e;
    e.actor = "tester";
    e.actorKind = ActorKind::System;
    e.via = "cli";
    return e;
  }

  // A user made as `ductus user create` makes one.
  UserInfo makeUser(const std::string& name, Role role, unsigned permissions,
                    const std::string& password, bool mustChange = false) {
    auto hash = hashPasswordNow(password);
    EXPECT_TRUE(hash.ok());
    auto u = onLoop<UserInfo>([&](auto done) {
      pool_->acquire([&, done](Result<store::PgPool::LeasePtr> lease) {
        if (!lease) return done(lease.error());
        auto l = *lease;
        createUser(l->conn(), NewUser{name, role, permissions, *hash, mustChange}, tester(),
                   clock_(), [l, done](Result<UserInfo> r) { done(std::move(r)); });
      });
    });
    EXPECT_TRUE(u.ok()) << u.error().message;
    return u.ok() ? *u : UserInfo{};
  }

  CreatedToken makeToken(const std::string& name, Role role, unsigned permissions,
                         std::optional<std::string> user = std::nullopt) {
    auto t = onLoop<CreatedToken>([&](auto done) {
      pool_->acquire([&, done](Result<store::PgPool::LeasePtr> lease) {
        if (!lease) return done(lease.error());
        auto l = *lease;
        createToken(l->conn(), NewToken{name, role, permissions, user}, tester(), clock_(),
                    [l, done](Result<CreatedToken> r) { done(std::move(r)); });
      });
    });
    EXPECT_TRUE(t.ok()) << t.error().message;
    return t.ok() ? *t : CreatedToken{};
  }

  ductus::test::HttpReply call(const std::string& method, const std::string& path,
                               const Headers& headers = {}, const std::string& body = {}) {
    auto c = ductus::test::HttpClient::connect(port_);
    if (!c) {
      ADD_FAILURE() << c.error().message;
      return {};
    }
    auto h = headers;
    if (!body.empty()) h["Content-Type"] = "application/json";
    auto r = c->request(method, path, body, h);
    if (!r) {
      ADD_FAILURE() << method << " " << path << ": " << r.error().message;
      return {};
    }
    return *r;
  }

  static Headers bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }
  static Headers cookie(const std::string& value, bool changes = false) {
    Headers h{{"Cookie", "ductus_session=" + value}};
    if (changes) h["X-Ductus"] = "1";
    return h;
  }

  // POST /api/v1/sessions.
  ductus::test::HttpReply signIn(const std::string& name, const std::string& password) {
    return call("POST", "/api/v1/sessions", {},
                nlohmann::json{{"name", name}, {"password", password}}.dump());
  }
  // The session cookie's value from a sign-in's Set-Cookie.
  static std::string sessionOf(const ductus::test::HttpReply& r) {
    std::string c = r.header("set-cookie");
    auto eq = c.find('=');
    auto semi = c.find(';');
    if (eq == std::string::npos || semi == std::string::npos) return {};
    return c.substr(eq + 1, semi - eq - 1);
  }

  void advance(std::chrono::seconds by) { *offset_ += by.count(); }

  ductus::test::TestDatabase db_;
  ductus::test::LoopThread loop_;
  std::shared_ptr<std::atomic<int64_t>> offset_ = std::make_shared<std::atomic<int64_t>>(0);
  Clock clock_;
  std::unique_ptr<store::PgPool> pool_;
  std::unique_ptr<PasswordHasher> hasher_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<StoreAuthenticator> authenticator_;
  std::unique_ptr<AuthDeps> deps_;
  std::unique_ptr<ApiServer> server_;
  uint16_t port_ = 0;
};

}  // namespace ductus::api::test
