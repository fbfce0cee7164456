// One SQL Server connection through FreeTDS's ODBC driver, against the TDS
// responder written for the tests (tests/support/tds_responder.py): no SQL
// Server runs here, so what the responder does not do (a real optimizer,
// locks, deadlocks, Kerberos) is not tried. The pool and db() on top are
// in services_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "supervisor/services/sqlserver/freetds_conf.h"
#include "supervisor/services/sqlserver/odbc_connection.h"
#include "tests/support/ports.h"
#include "tests/support/tds_responder.h"
#include "tests/support/test_ca.h"

namespace ductus::supervisor::services::sqlserver {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TdsResponder;
using namespace std::chrono_literals;

ConnectSettings trusting(uint16_t port, const std::string& host = "127.0.0.1") {
  ConnectSettings s;
  s.url = {host, port, TdsResponder::kUser, TdsResponder::kPassword, ""};
  s.trustServerCertificate = true;
  s.loginTimeout = 5s;
  return s;
}

Result<std::string> query(OdbcConnection& c, const std::string& sql,
                          const std::vector<Param>& params = {}, Caps caps = {},
                          std::chrono::milliseconds timeout = 5s) {
  auto b = bindMarkers(sql, params.size());
  if (!b) return b.error();
  return c.query(*b, params, caps, timeout);
}

class SqlServerConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-tds-ca.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ca_.emplace(dir_ / "ca");
    leaf_ = ca_->issue("sqlserver", "/CN=localhost", {"localhost"}, {"127.0.0.1"});
    server_.emplace(leaf_.cert, leaf_.key);
    ASSERT_GT(server_->port(), 0);
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<OdbcConnection> open(const ConnectSettings& s) {
    auto c = OdbcConnection::open(s);
    EXPECT_TRUE(c) << c.error().message;
    return c ? std::move(*c) : nullptr;
  }

  fs::path dir_;
  std::optional<test::TestCa> ca_;
  test::Issued leaf_;
  std::optional<TdsResponder> server_;
};

TEST_F(SqlServerConnectionTest, EveryTypeComesBackAsTheJsonPostgresWouldGive) {
  auto c = open(trusting(server_->port()));
  ASSERT_TRUE(c);
  auto rows = query(*c, "select * from all_types");
  ASSERT_TRUE(rows) << rows.error().message;
  json got = json::parse(*rows);
  ASSERT_EQ(got.size(), 2u);
  json first = got[0];
  EXPECT_EQ(first["nvmax"], std::string(10000, 'x'));  // nvarchar(max), read in parts
  // A column without a name is named by its place, as Postgres would not
  // (it says ?column?): JSON keys must differ when several have none.
  first.erase("nvmax");
  EXPECT_EQ(first, json::parse(R"({
    "i": 42, "bi": 9007199254740993, "si": -7, "ti": 255, "b": true,
    "dec": 12345.67, "num": 12345678901234567890123456789, "m": 922337203685477.5807, "sm": -3.5000,
    "f": 1.5000000000000001e+300, "r": 0.25,
    "d": "2024-01-02", "t": "03:04:05.1234567", "dt": "2024-01-02T03:04:05.123",
    "dt2": "2024-01-02T03:04:05.1234567", "sdt": "2024-01-02T03:04:00",
    "dto": "2024-01-02T03:04:05.1234567+05:30",
    "c": "abc", "vc": "héllo", "nvc": "Grüße €", "vb": "\\x0a0b0c0d",
    "g": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "column24": 7})"));
  // Exact numbers stay exact: the text, not a double, carries them.
  EXPECT_NE(rows->find("\"bi\":9007199254740993"), std::string::npos);
  EXPECT_NE(rows->find("\"m\":922337203685477.5807"), std::string::npos);
  EXPECT_NE(rows->find("\"num\":12345678901234567890123456789,"), std::string::npos);
  for (auto& [name, value] : got[1].items()) EXPECT_TRUE(value.is_null()) << name;
}

TEST_F(SqlServerConnectionTest, ParametersAreBoundAsTypedValuesNeverSplicedIntoTheText) {
  auto c = open(trusting(server_->port()));
  ASSERT_TRUE(c);
  std::string hostile = "x'); DROP TABLE patients; --";
  auto rows = query(
      *c, "select echo_params where a = $1 and b = $2 and c = $3 and d = $4 and e = $5 and f = $1",
      {{Param::Type::Integer, "7"},
       {Param::Type::Text, hostile},
       {Param::Type::Real, "1.5"},
       {Param::Type::Null, ""},
       {Param::Type::Boolean, "1"}});
  ASSERT_TRUE(rows) << rows.error().message;
  EXPECT_EQ(
      json::parse(*rows),
      json::parse(
          R"([{"P1":7,"P2":"x'); DROP TABLE patients; --","P3":1.5,"P4":null,"P5":true,"P6":7}])"))
      << *rows;
  auto rpc = server_->recorded("rpc");
  ASSERT_EQ(rpc.size(), 1u);
  std::string sql = rpc[0]["sql"];
  EXPECT_EQ(sql,
            "select echo_params where a = @P1 and b = @P2 and c = @P3 and d = @P4 and e = @P5 and "
            "f = @P6");
  EXPECT_EQ(sql.find("DROP"), std::string::npos);
}

TEST_F(SqlServerConnectionTest, TheServersRefusalIsTheStatementsAndALostConnectionIsTransient) {
  auto c = open(trusting(server_->port()));
  ASSERT_TRUE(c);
  auto refused = query(*c, "select raise_error");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::Invalid);
  EXPECT_NE(refused.error().message.find("the responder's error: select raise_error"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("error 50000"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(refused.error().message.find("[FreeTDS]"), std::string::npos)
      << refused.error().message;
  auto lost = query(*c, "select drop_connection");
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().kind, ErrorKind::Unavailable) << lost.error().message;
}

TEST_F(SqlServerConnectionTest, AWrongPasswordAServerThatIsDownOrOneThatCannotEncryptIsTransient) {
  auto wrong = trusting(server_->port());
  wrong.url.password = "not-the-password";
  auto refused = OdbcConnection::open(wrong);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::Unavailable);
  EXPECT_NE(refused.error().message.find("as sa"), std::string::npos) << refused.error().message;
  EXPECT_EQ(refused.error().message.find("not-the-password"), std::string::npos)
      << refused.error().message;

  // FreeTDS ends a braced value at "};": such a password cannot be sent.
  auto unsendable = trusting(server_->port());
  unsendable.url.password = "ab};UID=other";
  auto cannot = OdbcConnection::open(unsendable);
  ASSERT_FALSE(cannot);
  EXPECT_EQ(cannot.error().kind, ErrorKind::Invalid);
  EXPECT_NE(cannot.error().message.find("the password contains \"};\""), std::string::npos)
      << cannot.error().message;
  EXPECT_EQ(cannot.error().message.find("UID=other"), std::string::npos) << cannot.error().message;

  auto down = OdbcConnection::open(trusting(test::freePort()));
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().kind, ErrorKind::Unavailable) << down.error().message;

  // TLS is required: a server that offers none is not spoken to in clear.
  TdsResponder plain;
  auto clear = OdbcConnection::open(trusting(plain.port()));
  ASSERT_FALSE(clear);
  EXPECT_EQ(clear.error().kind, ErrorKind::Unavailable) << clear.error().message;
  EXPECT_TRUE(plain.recorded("login").empty())
      << "the login (and its password) went out unencrypted";
}

TEST_F(SqlServerConnectionTest, ExecuteCountsRowsAndAQueryReadsOnlyItsFirstResultSet) {
  auto c = open(trusting(server_->port()));
  ASSERT_TRUE(c);
  auto b = bindMarkers("UPDATE patients SET name = $1", 1);
  ASSERT_TRUE(b);
  auto n = c->execute(*b, {{Param::Type::Text, "a"}}, 5s);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(json::parse(*n), json::parse(R"({"rowCount":3})"));
  auto two = query(*c, "select two_results");
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(json::parse(*two), json::parse(R"([{"a":1}])"));
  // The connection is still usable after the unread second result set.
  auto again = query(*c, "select 1");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(json::parse(*again), json::parse(R"([{"one":1}])"));
}

TEST_F(SqlServerConnectionTest, AResultPastTheRowOrByteCapIsRefusedNamingTheCap) {
  auto c = open(trusting(server_->port()));
  ASSERT_TRUE(c);
  auto rows = query(*c, "select * from all_types", {}, {.maxRows = 1, .maxBytes = 16u << 20});
  ASSERT_FALSE(rows);
  EXPECT_EQ(rows.error().kind, ErrorKind::Invalid);
  EXPECT_NE(rows.error().message.find("1 row"), std::string::npos) << rows.error().message;
  auto bytes = query(*c, "select * from all_types", {}, {.maxRows = 100, .maxBytes = 5000});
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.error().kind, ErrorKind::Invalid);
  EXPECT_NE(bytes.error().message.find("5000 bytes"), std::string::npos) << bytes.error().message;
}

TEST_F(SqlServerConnectionTest, AStatementPastItsTimeoutIsCancelledAndTransient) {
  auto c = open(trusting(server_->port()));
  ASSERT_TRUE(c);
  auto start = std::chrono::steady_clock::now();
  auto slow = query(*c, "waitfor delay '00:00:30'", {}, {}, 1s);
  ASSERT_FALSE(slow);
  EXPECT_EQ(slow.error().kind, ErrorKind::Unavailable) << slow.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << "the statement ran to its end";
}

// TLS: the server's certificate verified against the database's CA (the
// system's roots when it names none) and its name checked, unless
// trust_server_certificate says otherwise.
TEST_F(SqlServerConnectionTest, TheServerIsVerifiedAgainstItsCaAndItsNameUnlessTrusted) {
  auto verified = trusting(server_->port(), "localhost");
  verified.trustServerCertificate = false;
  verified.caFile = ca_->cert();
  auto ok = OdbcConnection::open(verified);
  ASSERT_TRUE(ok) << ok.error().message;
  auto logins = server_->recorded("login");
  ASSERT_EQ(logins.size(), 1u);
  EXPECT_EQ(logins[0]["encrypted"], true);

  test::TestCa other(dir_ / "other", "Another CA");
  auto wrongCa = verified;
  wrongCa.caFile = other.cert();
  auto refused = OdbcConnection::open(wrongCa);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::Unavailable);
  EXPECT_NE(refused.error().message.find("SQL Server localhost:"), std::string::npos)
      << refused.error().message;

  auto systemRoots = verified;  // no ca: the system's roots, which do not hold the test CA
  systemRoots.caFile.clear();
  EXPECT_FALSE(OdbcConnection::open(systemRoots));

  // The right CA, but a certificate for another name.
  auto elsewhere = ca_->issue("elsewhere", "/CN=elsewhere", {"elsewhere.example"}, {"10.9.9.9"});
  TdsResponder impostor(elsewhere.cert, elsewhere.key);
  auto wrongName = verified;
  wrongName.url.port = impostor.port();
  EXPECT_FALSE(OdbcConnection::open(wrongName));
  EXPECT_TRUE(impostor.recorded("login").empty()) << "the login went to a server with another name";

  // Trusted: whatever the server shows, still encrypted.
  auto trusted = wrongName;
  trusted.trustServerCertificate = true;
  auto any = OdbcConnection::open(trusted);
  ASSERT_TRUE(any) << any.error().message;
  ASSERT_EQ(impostor.recorded("login").size(), 1u);
  EXPECT_EQ(impostor.recorded("login")[0]["encrypted"], true);
  EXPECT_EQ(logins.size() + server_->recorded("login").size(), 2u)
      << "the refused connections logged in";
}

TEST(SqlServerFreetdsConf, ASectionVerifiesUnlessTrustedAndRefusesWhatALineCannotHold) {
  ConnectSettings s;
  s.url = {"db.lab.example", 1444, "u", "p", "d"};
  s.caFile = "/etc/ductus/sql ca.pem";
  auto text = FreetdsConf::sectionText("ductus-9", s);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text,
            "[ductus-9]\n\thost = db.lab.example\n\tport = 1444\n\ttds version = 7.4\n\tencryption "
            "= require\n"
            "\tca file = /etc/ductus/sql ca.pem\n\tcheck certificate hostname = yes\n");
  s.caFile.clear();
  EXPECT_NE(FreetdsConf::sectionText("ductus-9", s)->find("\tca file = system\n"),
            std::string::npos);
  s.trustServerCertificate = true;
  EXPECT_EQ(FreetdsConf::sectionText("ductus-9", s)->find("ca file"), std::string::npos);
  s.trustServerCertificate = false;
  for (const char* bad : {"/tmp/a\n[evil]", "/tmp/a;b", "/tmp/a#b", " /tmp/a"}) {
    s.caFile = bad;
    auto refused = FreetdsConf::sectionText("ductus-9", s);
    ASSERT_FALSE(refused) << bad;
    EXPECT_EQ(refused.error().kind, ErrorKind::Invalid);
    EXPECT_NE(refused.error().message.find("the CA file"), std::string::npos)
        << refused.error().message;
  }
  // The same settings share a section; the file is private to the engine.
  s.caFile = "/etc/ductus/ca.pem";
  auto a = FreetdsConf::sectionFor(s);
  auto b = FreetdsConf::sectionFor(s);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  const char* file = getenv("FREETDSCONF");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(fs::status(file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_NE(test::fileText(file).find("[" + *a + "]\n\thost = db.lab.example\n"),
            std::string::npos);
}

}  // namespace
}  // namespace ductus::supervisor::services::sqlserver
