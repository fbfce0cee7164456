// What keeps a slow or stuck PostgreSQL from hanging the engine: every
// connection string gets connect_timeout and TCP keepalives unless it sets
// them (schema/conninfo.h); the connect timeout is enforced although libpq
// leaves it to non-blocking callers; the store's statements run under a
// statement_timeout (StoreOptions::statementTimeout), so an insert behind a
// lock fails, and is answered, instead of waiting forever.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "common/fd.h"
#include "common/tls/certificates.h"
#include "schema/conninfo.h"
#include "schema/pg_error.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_env.h"

namespace ductus::store::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The keyword/value pairs of a connection string, as libpq reads them.
std::map<std::string, std::string> params(const std::string& conninfo) {
  std::map<std::string, std::string> out;
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err);
  if (!opts) {
    ADD_FAILURE() << conninfo << ": " << (err ? err : "?");
    PQfreemem(err);
    return out;
  }
  for (PQconninfoOption* o = opts; o->keyword; ++o)
    if (o->val) out[o->keyword] = o->val;
  PQconninfoFree(opts);
  return out;
}

// PGCONNECT_TIMEOUT from the shell would count as the operator's setting.
class Conninfo : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("PGCONNECT_TIMEOUT")) saved_ = v;
    ::unsetenv("PGCONNECT_TIMEOUT");
  }
  void TearDown() override {
    if (saved_)
      ::setenv("PGCONNECT_TIMEOUT", saved_->c_str(), 1);
    else
      ::unsetenv("PGCONNECT_TIMEOUT");
  }
  std::optional<std::string> saved_;
};

TEST_F(Conninfo, AKeywordStringAndAUrlWithoutThemGetConnectTimeoutAndKeepalives) {
  for (const char* given : {"host=/tmp/pg port=5432 user=postgres dbname=postgres",
                            "postgresql://postgres@db.example:6432/ductus?sslmode=prefer"}) {
    auto hardened = hardenedConninfo(given);
    ASSERT_TRUE(hardened) << hardened.error().message;
    auto p = params(*hardened);
    EXPECT_EQ(p["connect_timeout"], "10") << *hardened;
    EXPECT_EQ(p["keepalives"], "1");
    EXPECT_EQ(p["keepalives_idle"], "15");
    EXPECT_EQ(p["keepalives_interval"], "5");
    EXPECT_EQ(p["keepalives_count"], "3");
    // Everything the string said is still said.
    for (auto& [k, v] : params(given)) EXPECT_EQ(p[k], v) << k << " in " << *hardened;
  }
  auto url = params(*hardenedConninfo("postgresql://postgres@db.example:6432/ductus"));
  EXPECT_EQ(url["host"], "db.example");
  EXPECT_EQ(url["port"], "6432");
  EXPECT_EQ(url["dbname"], "ductus");
}

TEST_F(Conninfo, AStringThatSetsConnectTimeoutOrAKeepaliveKeepsItsOwn) {
  auto keyword = hardenedConninfo("host=db connect_timeout=3 keepalives_idle=60");
  ASSERT_TRUE(keyword) << keyword.error().message;
  auto k = params(*keyword);
  EXPECT_EQ(k["connect_timeout"], "3");
  EXPECT_EQ(k["keepalives_idle"], "60");
  EXPECT_EQ(k["keepalives_count"], "3");  // the ones it did not set are added
  auto url = hardenedConninfo("postgresql://db/x?connect_timeout=0&keepalives=0");
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(params(*url)["connect_timeout"], "0");
  EXPECT_EQ(params(*url)["keepalives"], "0");
  // Its environment variable is the operator's setting too.
  ::setenv("PGCONNECT_TIMEOUT", "4", 1);
  auto env = hardenedConninfo("host=db");
  ASSERT_TRUE(env) << env.error().message;
  EXPECT_EQ(params(*env).count("connect_timeout"), 0u) << *env;
}

TEST_F(Conninfo, ValuesWithQuotesAndBackslashesSurviveTheRebuild) {
  auto hardened = hardenedConninfo("host=db password='it\\'s \\\\ x' application_name='a b'");
  ASSERT_TRUE(hardened) << hardened.error().message;
  auto p = params(*hardened);
  EXPECT_EQ(p["password"], "it's \\ x");
  EXPECT_EQ(p["application_name"], "a b");
}

TEST_F(Conninfo, AStringThatDoesNotParseIsAnErrorSayingWhy) {
  auto bad = hardenedConninfo("host=db nonsense");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("does not parse"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("nonsense"), std::string::npos) << bad.error().message;
  auto url = hardenedConninfo("postgresql://db/x?no_such_option=1");
  ASSERT_FALSE(url);
  EXPECT_NE(url.error().message.find("no_such_option"), std::string::npos) << url.error().message;
}

TEST_F(Conninfo, DefaultsAreAddedOnlyWhereNothingIsSet) {
  auto named = withConninfoDefaults("host=db application_name=mine",
                                    {{"application_name", "ductus"}, {"sslmode", "prefer"}});
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ(params(*named)["application_name"], "mine");
  EXPECT_EQ(params(*named)["sslmode"], "prefer");
  EXPECT_EQ(conninfoValue(*named, "host"), "db");
  EXPECT_EQ(conninfoValue(*named, "port"), "");
}

TEST_F(Conninfo, AProjectsCaMakesItVerifyFullReplacingAWeakerSslmodeInTheUrl) {
  auto v = withVerifiedTls("postgresql://db.example/x?sslmode=disable&sslrootcert=/tmp/old.pem",
                           "/etc/ductus/it's ca.pem");
  ASSERT_TRUE(v) << v.error().message;
  auto p = params(*v);
  EXPECT_EQ(p["sslmode"], "verify-full");
  EXPECT_EQ(p["sslrootcert"], "/etc/ductus/it's ca.pem");
  EXPECT_EQ(p["host"], "db.example");
  EXPECT_EQ(p["dbname"], "x");
}

TEST_F(Conninfo, ADatabaseCaFromAFileIsReadThereAndPemTextGoesToAPrivateFileRemovedAfter) {
  std::map<std::string, tls::CertificateSource> sources;
  sources["file"] = {.name = "file", .caFile = "/etc/ductus/ca.pem"};
  std::filesystem::path written;
  {
    DatabaseTls files;
    auto fromFile = files.apply("db(\"lab\")", "host=db", {.enabled = true, .ca = "file"}, sources,
                                nullptr);
    ASSERT_TRUE(fromFile) << fromFile.error().message;
    EXPECT_EQ(params(*fromFile)["sslrootcert"], "/etc/ductus/ca.pem");
    EXPECT_TRUE(files.written().empty());
    // Not enabled, or no ca: the string as it was.
    EXPECT_EQ(*files.apply("db", "host=db", {}, sources, nullptr), "host=db");

    // A CA as PEM text needs the loaded certificates.
    char tmpl[] = "/tmp/ductus-dbtls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    ductus::test::TestCa ca(tmpl);
    std::ifstream in(ca.cert());
    std::stringstream pem;
    pem << in.rdbuf();
    sources["text"] = {.name = "text", .caPem = pem.str()};
    auto none = files.apply("db(\"lab\")", "host=db", {.enabled = true, .ca = "text"}, sources,
                            nullptr);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error().message.rfind("db(\"lab\"): ", 0), 0u) << none.error().message;
    auto certs = tls::Certificates::load({sources["text"]});
    ASSERT_TRUE(certs) << certs.error().message;
    auto fromText = files.apply("db(\"lab\")", "host=db", {.enabled = true, .ca = "text"}, sources,
                                certs->get());
    ASSERT_TRUE(fromText) << fromText.error().message;
    ASSERT_EQ(files.written().size(), 1u);
    written = files.written()[0];
    EXPECT_EQ(params(*fromText)["sslrootcert"], written.string());
    EXPECT_EQ(params(*fromText)["sslmode"], "verify-full");
    EXPECT_EQ(std::filesystem::status(written).permissions(),
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::ifstream back(written);
    std::stringstream got;
    got << back.rdbuf();
    EXPECT_NE(got.str().find("-----BEGIN CERTIFICATE-----"), std::string::npos);
    std::filesystem::remove_all(tmpl);
  }
  EXPECT_FALSE(std::filesystem::exists(written));
}

// A server that completes the TCP handshake (the kernel does, from the
// listen backlog) and then never says a word: libpq's non-blocking connect
// would wait for its first message forever.
TEST(ConnectTimeout, AServerThatNeverAnswersFailsTheConnectAfterConnectTimeout) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.get() >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener.get(), 8), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string port = std::to_string(ntohs(a.sin_port));

  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Status> got;
  auto started = Clock::now();
  {
    PgConnection conn(&loop);
    conn.connect("host=127.0.0.1 port=" + port + " dbname=x connect_timeout=2",
                 [&](Status s) { got = s; });
    while (!got && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  auto took = Clock::now() - started;
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0) << "a handle was left open";
  ASSERT_TRUE(got.has_value()) << "the loop ran dry without an answer";
  ASSERT_FALSE(*got);
  EXPECT_NE(got->error().message.find("no connection to 127.0.0.1:" + port +
                                      " within 2 s (connect_timeout)"),
            std::string::npos)
      << got->error().message;
  // Ended by the timeout rather than waiting for ever: the bound leaves the
  // 2 s ten times over for a busy machine.
  EXPECT_GE(took, 1900ms);
  EXPECT_LT(took, 20s);
}

// A listener that completes the TCP handshake and never says a word; its
// port in `port`.
Fd silentListener(std::string& port) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listener.get() < 0 ||
      ::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listener.get(), 8) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
    ADD_FAILURE() << "no listener: " << std::strerror(errno);
  port = std::to_string(ntohs(a.sin_port));
  return listener;
}

// libpq's non-blocking connect has no per-host timeout: a silent first host
// of a multi-host URL (a frozen primary) used to end the whole attempt at
// connect_timeout. The attempt goes on with the hosts after it now.
TEST(ConnectTimeout, AMultiHostStringMovesOnFromAHostThatNeverAnswersToTheNext) {
  std::string port;
  Fd listener = silentListener(port);
  std::string url = ductus::test::databaseUrl();
  std::string host = conninfoValue(url, "host"), dbPort = conninfoValue(url, "port");
  ASSERT_FALSE(host.empty()) << url;
  std::string conninfo = "host=127.0.0.1," + host + " port=" + port + "," +
                         (dbPort.empty() ? "5432" : dbPort) + " dbname=postgres connect_timeout=2";
  if (auto user = conninfoValue(url, "user"); !user.empty()) conninfo += " user=" + user;
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Status> got;
  std::optional<Result<PgResult>> answer;
  auto started = Clock::now();
  {
    PgConnection conn(&loop);
    conn.connect(conninfo, [&](Status s) { got = s; });
    conn.query("SELECT 1", {}, [&](Result<PgResult> r) { answer = std::move(r); });
    while (!answer && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  auto took = Clock::now() - started;
  uv_run(&loop, UV_RUN_DEFAULT);
  EXPECT_EQ(uv_loop_close(&loop), 0) << "a handle was left open";
  ASSERT_TRUE(got.has_value()) << "the loop ran dry without an answer";
  ASSERT_TRUE(*got) << got->error().message;
  ASSERT_TRUE(answer && *answer) << (answer ? answer->error().message : "no answer");
  EXPECT_EQ((*answer)->text(0, 0), "1");
  EXPECT_GE(took, 1900ms);  // the silent host had its 2 s first
}

TEST(ConnectTimeout, TheHostsAfterTheOneThatTimedOutKeepTheirPortsAndEverythingElse) {
  auto rest = conninfoAfterHost("host=a,b,c port=1,2,3 dbname='x y' connect_timeout=2", "a", "1");
  ASSERT_TRUE(rest);
  EXPECT_EQ(conninfoValue(*rest, "host"), "b,c");
  EXPECT_EQ(conninfoValue(*rest, "port"), "2,3");
  EXPECT_EQ(conninfoValue(*rest, "dbname"), "x y");
  EXPECT_EQ(conninfoValue(*rest, "connect_timeout"), "2");
  // One port for every host; the URL form; the same host on two ports.
  rest = conninfoAfterHost("host=db1,db2,db3 port=6543", "db1", "6543");
  ASSERT_TRUE(rest);
  EXPECT_EQ(conninfoValue(*rest, "host"), "db2,db3");
  EXPECT_EQ(conninfoValue(*rest, "port"), "6543");
  rest = conninfoAfterHost(
      "postgresql://db1:5432,db2:5433,db3/ductus?target_session_attrs=read-write", "db2", "5433");
  ASSERT_TRUE(rest);
  EXPECT_EQ(conninfoValue(*rest, "host"), "db3");
  EXPECT_EQ(conninfoValue(*rest, "port"), "");  // db3's own: the default
  EXPECT_EQ(conninfoValue(*rest, "dbname"), "ductus");
  EXPECT_EQ(conninfoValue(*rest, "target_session_attrs"), "read-write");
  rest = conninfoAfterHost("host=h,h port=1,2", "h", "1");
  ASSERT_TRUE(rest);
  EXPECT_EQ(conninfoValue(*rest, "port"), "2");
  // No port in the string (PGPORT's, whatever it is): the host says which.
  rest = conninfoAfterHost("host=a,b dbname=x", "a", "6000");
  ASSERT_TRUE(rest);
  EXPECT_EQ(conninfoValue(*rest, "host"), "b");
  // The last host, a single one, or one the string doesn't have: nothing.
  EXPECT_FALSE(conninfoAfterHost("host=a,b port=1,2", "b", "2"));
  EXPECT_FALSE(conninfoAfterHost("host=a port=1", "a", "1"));
  EXPECT_FALSE(conninfoAfterHost("host=a,b port=1,2", "c", "1"));
}

TEST(ConnectTimeout, AConnectionStringThatDoesNotParseFailsTheConnect) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<Status> got;
  {
    PgConnection conn(&loop);
    conn.connect("host=db nonsense", [&](Status s) { got = s; });
    while (!got && uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(*got);
  EXPECT_NE(got->error().message.find("does not parse"), std::string::npos) << got->error().message;
}

class StatementTimeout : public StoreTest {
 protected:
  std::string setting(Store& store, const std::string& name) {
    auto r = await<PgResult>(&loop_, [&](auto cb) {
      store.sharedConnections().acquire([cb, name](Result<PgPool::LeasePtr> l) {
        if (!l) return cb(l.error());
        (*l)->conn().query("SELECT current_setting($1)", {name},
                           [cb, lease = *l](Result<PgResult> r) { cb(std::move(r)); });
      });
    });
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r ? std::string(r->text(0, 0)) : "";
  }
};

TEST_F(StatementTimeout, TheStoresConnectionsRunUnderThirtySecondsByDefault) {
  EXPECT_EQ(StoreOptions{}.statementTimeout, 30s);
  EXPECT_EQ(setting(*store_, "statement_timeout"), "30s");
  // The engine's other session settings are still there.
  EXPECT_EQ(setting(*store_, "TimeZone"), "UTC");
  EXPECT_EQ(setting(*store_, "plan_cache_mode"), "force_generic_plan");
  // A generic plan's estimates would compile short statements (250 ms of a
  // 0.2 ms browser page); the cluster's default is on.
  EXPECT_EQ(setting(*store_, "jit"), "off");
}

TEST_F(StatementTimeout, AnInsertBehindALockedTableFailsWithinTheTimeoutThenSucceedsOnceReleased) {
  StoreOptions o{db_->conninfo(), 2};
  o.statementTimeout = 500ms;
  Store store(&loop_, o);
  auto started = await<bool>(&loop_, [&](auto cb) {
    store.start([cb](Status s) {
      if (!s) return cb(s.error());
      cb(true);
    });
  });
  ASSERT_TRUE(started.ok()) << started.error().message;
  EXPECT_EQ(setting(store, "statement_timeout"), "500ms");

  // Another session holds the table, as a long migration or an operator's
  // LOCK would. (Blocking libpq: the test's own connection.)
  PGconn* holder = PQconnectdb(db_->conninfo().c_str());
  ASSERT_EQ(PQstatus(holder), CONNECTION_OK) << PQerrorMessage(holder);
  PQclear(PQexec(holder, "BEGIN"));
  PGresult* locked = PQexec(holder, "LOCK TABLE messages IN ACCESS EXCLUSIVE MODE");
  ASSERT_EQ(PQresultStatus(locked), PGRES_COMMAND_OK) << PQerrorMessage(holder);
  PQclear(locked);

  auto t0 = Clock::now();
  auto blocked =
      await<StoredMessage>(&loop_, [&](auto cb) { store.insert(message("m1", {destA_}), cb); });
  auto took = Clock::now() - t0;
  ASSERT_FALSE(blocked.ok()) << "stored through a lock held by another session";
  EXPECT_TRUE(store::pg::queryCanceled(blocked.error())) << blocked.error().message;
  EXPECT_NE(blocked.error().message.find("statement timeout"), std::string::npos)
      << blocked.error().message;
  // 500 ms, or twice that: a group that fails is tried again one by one.
  // The upper bound is that ten times over (a lock waited on for ever is
  // what it catches).
  EXPECT_GE(took, 450ms);
  EXPECT_LT(took, 10s);

  PQclear(PQexec(holder, "ROLLBACK"));
  auto stored =
      await<StoredMessage>(&loop_, [&](auto cb) { store.insert(message("m2", {destA_}), cb); });
  ASSERT_TRUE(stored.ok()) << stored.error().message;
  PQfinish(holder);
  // Nothing of the refused insert was kept; the second is there, queued.
  EXPECT_EQ(scalar("SELECT count(*) FROM messages"), 1);
  auto q = queue(destA_);
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].payload, "m2");
}

}  // namespace
}  // namespace ductus::store::test
