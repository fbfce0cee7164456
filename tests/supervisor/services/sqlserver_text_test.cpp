// SQL Server's pure parts: $n bound as markers outside literals, names and
// comments; a value's JSON as PostgreSQL gives it; the URL resources.yaml
// takes.
#include <gtest/gtest.h>
#include <sql.h>
#include <sqlext.h>

#include "common/config/sqlserver_url.h"
#include "supervisor/services/sqlserver/parameters.h"
#include "supervisor/services/sqlserver/row_json.h"

namespace ductus::supervisor::services::sqlserver {
namespace {

TEST(SqlServerMarkers, DollarParametersBecomeMarkersBoundInTheOrderTheyStand) {
  auto b = bindMarkers("SELECT * FROM p WHERE mrn = $2 AND site = $1 OR mrn = $2", 2);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->sql, "SELECT * FROM p WHERE mrn = ? AND site = ? OR mrn = ?");
  EXPECT_EQ(b->order, (std::vector<size_t>{1, 0, 1}));
}

TEST(SqlServerMarkers, LiteralsQuotedNamesAndCommentsKeepTheirDollars) {
  std::string sql =
      "SELECT 'cost $1', N'it''s $2', [col $1], \"x $1\"\"\", $1 -- $2 here\n"
      "/* $2 /* nested $2 */ still $2 */ FROM t WHERE a = $2";
  auto b = bindMarkers(sql, 2);
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->sql,
            "SELECT 'cost $1', N'it''s $2', [col $1], \"x $1\"\"\", ? -- $2 here\n"
            "/* $2 /* nested $2 */ still $2 */ FROM t WHERE a = ?");
  EXPECT_EQ(b->order, (std::vector<size_t>{0, 1}));
  // A MERGE's $action is a name, not a parameter.
  auto merge = bindMarkers("OUTPUT $action", 0);
  ASSERT_TRUE(merge);
  EXPECT_EQ(merge->sql, "OUTPUT $action");
}

TEST(SqlServerMarkers, AMissingParameterABareMarkerOrAnOpenLiteralIsRefused) {
  auto three = bindMarkers("SELECT $3", 2);
  ASSERT_FALSE(three);
  EXPECT_EQ(three.error().kind, ErrorKind::Invalid);
  EXPECT_NE(three.error().message.find("$3 names no parameter (2 were given)"), std::string::npos)
      << three.error().message;
  EXPECT_FALSE(bindMarkers("SELECT $0", 1));
  auto bare = bindMarkers("SELECT * FROM t WHERE a = ?", 1);
  ASSERT_FALSE(bare);
  EXPECT_NE(bare.error().message.find("bare ?"), std::string::npos);
  EXPECT_TRUE(bindMarkers("SELECT '?'", 0)) << "a ? in a literal is text";
  EXPECT_FALSE(bindMarkers("SELECT 'open", 0));
  EXPECT_FALSE(bindMarkers("SELECT [open", 0));
  EXPECT_FALSE(bindMarkers("SELECT 1 /* /* */", 0));
}

std::string json(ValueKind k, std::string_view v) {
  std::string out;
  appendJsonValue(out, k, v);
  return out;
}

TEST(SqlServerRowJson, EachTypeIsWrittenAsPostgresWritesItsJson) {
  EXPECT_EQ(valueKindOf(SQL_INTEGER), ValueKind::Number);
  EXPECT_EQ(valueKindOf(SQL_BIT), ValueKind::Boolean);
  EXPECT_EQ(valueKindOf(SQL_GUID), ValueKind::Guid);
  EXPECT_EQ(valueKindOf(SQL_VARBINARY), ValueKind::Binary);
  EXPECT_EQ(valueKindOf(-155), ValueKind::TimestampOffset);
  EXPECT_EQ(valueKindOf(SQL_WVARCHAR), ValueKind::Text);
  // Every digit of a bigint and a decimal, as the server wrote them.
  EXPECT_EQ(json(ValueKind::Number, "9007199254740993"), "9007199254740993");
  EXPECT_EQ(json(ValueKind::Number, "12345678901234567890123456789"),
            "12345678901234567890123456789");
  EXPECT_EQ(json(ValueKind::Number, ".5000"), "0.5000");
  EXPECT_EQ(json(ValueKind::Number, "-.25"), "-0.25");
  EXPECT_EQ(json(ValueKind::Number, "1.5e+300"), "1.5e+300");
  EXPECT_EQ(json(ValueKind::Number, "NaN"), "\"NaN\"") << "never invalid JSON";
  EXPECT_EQ(json(ValueKind::Boolean, "1"), "true");
  EXPECT_EQ(json(ValueKind::Boolean, "0"), "false");
  EXPECT_EQ(json(ValueKind::Date, "2024-01-02"), "\"2024-01-02\"");
  EXPECT_EQ(json(ValueKind::Time, "03:04:05.1234500"), "\"03:04:05.12345\"");
  EXPECT_EQ(json(ValueKind::Timestamp, "2024-01-02 03:04:05.1234567"),
            "\"2024-01-02T03:04:05.1234567\"");
  EXPECT_EQ(json(ValueKind::Timestamp, "2024-01-02 03:04:00.000"), "\"2024-01-02T03:04:00\"");
  EXPECT_EQ(json(ValueKind::TimestampOffset, "2024-01-02 03:04:05.1234567 +05:30"),
            "\"2024-01-02T03:04:05.1234567+05:30\"");
  EXPECT_EQ(json(ValueKind::Binary, std::string("\x0a\x0b\xff", 3)), "\"\\\\x0a0bff\"");
  EXPECT_EQ(json(ValueKind::Guid, "6f9619ff-8b86-d011-b42d-00c04fc964ff"),
            "\"6F9619FF-8B86-D011-B42D-00C04FC964FF\"");
  EXPECT_EQ(json(ValueKind::Text, "Grüße \"€\""), "\"Grüße \\\"€\\\"\"");
  EXPECT_EQ(columnKey("", 3), "\"column3\"");
  EXPECT_EQ(columnKey("mrn", 1), "\"mrn\"");
}

TEST(SqlServerUrl, ReadsUserPasswordHostPortAndDatabase) {
  auto u =
      config::parseSqlServerUrl("sqlserver://ductus:p%40ss%3Bw0rd@emr-db.hospital.org:14330/EMR");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->user, "ductus");
  EXPECT_EQ(u->password, "p@ss;w0rd");
  EXPECT_EQ(u->host, "emr-db.hospital.org");
  EXPECT_EQ(u->port, 14330);
  EXPECT_EQ(u->database, "EMR");
  auto v6 = config::parseSqlServerUrl("sqlserver://u@[::1]/db");
  ASSERT_TRUE(v6) << v6.error().message;
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 1433);
  for (const char* bad :
       {"postgresql://u@h/db", "sqlserver://h/db", "sqlserver://u@:1433/db", "sqlserver://u@h:0/db",
        "sqlserver://u@h:99999/db", "sqlserver://u@h/db?x=1", "sqlserver://u;x@h/db",
        "sqlserver://u:%zz@h/db"}) {
    auto r = config::parseSqlServerUrl(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().message.find("%zz"), std::string::npos) << "never quotes the password";
    }
  }
}

}  // namespace
}  // namespace ductus::supervisor::services::sqlserver
