// `ductus try` as a person building an interface runs it: the real binary,
// a real worker, on the examples and on copies of them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/common/config/project_dir.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::config::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

int exitCode(const ductus::test::ChildOutput& r) {
  return ::ductus::test::exitCode(r.exitStatus);
}

const std::string kAdt =
    "MSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|MSG1|P|2.5\r"
    "PID|1||12345^^^H||Doe^John\r";
const std::string kOru =
    "MSH|^~\\&|LAB|HOSP|EHR|HOSP|202601011200||ORU^R01|MSG0042|P|2.5\r"
    "PID|1||MRN123^^^HOSP^MR||Doe^Jane\r"
    "OBR|1|||GLU^Glucose^LN\r"
    "OBX|1|NM|GLU^Glucose^LN||5.4|mmol/L^millimoles per litre|3.9-5.8|N|||F\r";

class TryCommand : public ::testing::Test {
 protected:
  // `ductus try PROJECT INTERFACE FILE`, FILE holding `message`; stderr
  // folded into the output.
  ductus::test::ChildOutput tryIt(const fs::path& project, const std::string& iface,
                                  const std::string& message) {
    fs::path file = dir_.write("message.in", message);
    std::string line = std::string(ductus::test::ductusBinary()) + " try '" + project.string() +
                       "' " + iface + " '" + file.string() + "' 2>&1";
    return ductus::test::runChild({"/bin/sh", "-c", line});
  }
  static fs::path example(const std::string& name) {
    return fs::path(DUCTUS_SOURCE_DIR) / "examples" / name;
  }
  ProjectDir dir_;
};

TEST_F(TryCommand, PrintsEachDestinationsOutputOneSegmentALine) {
  auto r = tryIt(example("adt-feed"), "adt-feed", kAdt);
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_EQ(r.out,
            "default: transform() \u2192 file out/\n"
            "  output (hl7v2):\n"
            "    MSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|MSG1|P|2.5\n"
            "    PID|1||12345^^^H||DOE^John\n");
}

TEST_F(TryCommand, EveryDestinationRunsItsOwnFunction) {
  auto r = tryIt(example("lab-results-http"), "lab-results", kOru);
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("receiver: toJson() \u2192 http POST api lab-receiver/results\n"
                               "  output (json):\n"
                               "    {\"mrn\":\"MRN123\",\"test\":\"GLU\",\"value\":\"5.4\",\"units\":\"mmol/L\"}\n"));
  EXPECT_THAT(r.out, HasSubstr("archive: transform() \u2192 file archive/\n"
                               "  output (hl7v2):\n"
                               "    MSH|^~\\&|LAB|"));
  EXPECT_THAT(r.out, HasSubstr("\n    OBX|1|NM|GLU^Glucose^LN||5.4|"));
}

TEST_F(TryCommand, AFilteredMessageSaysSoAndStillExitsZero) {
  auto r = tryIt(example("adt-feed"), "adt-feed", kOru);  // ADT only
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("  filtered\n"));
}

TEST_F(TryCommand, AThrownErrorIsShownWithItsLineAndExitsOne) {
  std::string noMrn =
      "MSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|MSG1|P|2.5\rPID|1||||Doe^John\r";
  auto r = tryIt(example("adt-feed"), "adt-feed", noMrn);
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("  error (the engine would quarantine the message):\n"
                               "    Quarantine: no MRN\n"));
  EXPECT_THAT(r.out, HasSubstr("interfaces/adt-feed/transform.js:6:"));
}

TEST_F(TryCommand, CodeThatDoesNotLoadIsNamedByFileAndLine) {
  fs::copy(example("adt-feed"), dir_.root(),
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  dir_.write("interfaces/adt-feed/transform.js", "\nlet x = ;\n");
  auto r = tryIt(dir_.root(), "adt-feed", kAdt);
  EXPECT_EQ(exitCode(r), 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr((dir_.root() / "interfaces/adt-feed/transform.js").string() +
                               ":2:9: SyntaxError: Unexpected token ';'\n"));
}

// Services are mocked, each call printed: nothing is reached.
TEST_F(TryCommand, ServicesAreMockedAndShown) {
  dir_.write("resources.yaml",
             "databases:\n  mpi: { url: postgres://nowhere.invalid/mpi }\n"
             "apis:\n  lab: { url: http://nowhere.invalid }\n");
  dir_.iface("look", "source:\n  mllp: { listen: 127.0.0.1:2599 }\ndestination:\n  file: { path: out/ }\n");
  dir_.write("interfaces/look/transform.js",
             "import { db, api } from \"ductus\";\n"
             "export async function transform(msg) {\n"
             "  const rows = await db(\"mpi\").query(\"SELECT id FROM patients WHERE mrn = $1\", [msg.get(\"PID.3.1\")]);\n"
             "  const res = await api(\"lab\").post(\"/seen\", { n: rows.length });\n"
             "  console.log(\"looked up\", rows.length);\n"
             "  msg.set(\"PID.5.2\", `rows=${rows.length} status=${res.status}`);\n"
             "  return msg;\n"
             "}\n");
  auto r = tryIt(dir_.root(), "look", kAdt);
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("    db(\"mpi\").query SELECT id FROM patients WHERE mrn = $1 [\"12345\"] -> [] (mocked)\n"));
  EXPECT_THAT(r.out, HasSubstr("    POST api(\"lab\") /seen {\"n\":0} -> 200, empty body (mocked)\n"));
  EXPECT_THAT(r.out, HasSubstr("    log info: looked up 0\n"));
  EXPECT_THAT(r.out, HasSubstr("    PID|1||12345^^^H||Doe^rows=0 status=200\n"));
}

// A SQL Server database's db() is mocked as a PostgreSQL one's: the same
// call, the same answer, nothing reached.
TEST_F(TryCommand, ASqlServerDatabaseIsMockedAsPostgresIs) {
  dir_.write("resources.yaml",
             "databases:\n  emr: { kind: sqlserver, url: "
             "\"sqlserver://ductus:pw@nowhere.invalid/EMR\" }\n");
  dir_.iface("look",
             "source:\n  mllp: { listen: 127.0.0.1:2599 }\ndestination:\n  file: { path: out/ }\n");
  dir_.write("interfaces/look/transform.js",
             "import { db } from \"ductus\";\n"
             "export async function transform(msg) {\n"
             "  const rows = await db(\"emr\").query(\"SELECT TOP 1 id FROM patients WHERE mrn = "
             "$1\", [msg.get(\"PID.3.1\")]);\n"
             "  const done = await db(\"emr\").execute(\"UPDATE seen SET n = n + 1 WHERE mrn = "
             "$1\", [msg.get(\"PID.3.1\")]);\n"
             "  msg.set(\"PID.5.2\", `rows=${rows.length} changed=${done.rowCount}`);\n"
             "  return msg;\n"
             "}\n");
  auto r = tryIt(dir_.root(), "look", kAdt);
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("    db(\"emr\").query SELECT TOP 1 id FROM patients WHERE mrn = $1 "
                               "[\"12345\"] -> [] (mocked)\n"));
  EXPECT_THAT(r.out, HasSubstr("    db(\"emr\").execute UPDATE seen SET n = n + 1 WHERE mrn = $1 "
                               "[\"12345\"] -> { rowCount: 0 } (mocked)\n"));
  EXPECT_THAT(r.out, HasSubstr("    PID|1||12345^^^H||Doe^rows=0 changed=0\n"));
}

// try connects to nothing and sends nothing: the database's variable, a
// destination's, need not be set in the shell that tries.
TEST_F(TryCommand, NeedsNoVariableTheProjectNames) {
  fs::copy(example("adt-feed"), dir_.root() / "p", fs::copy_options::recursive);
  dir_.write("p/ductus.yaml", "database: ${env:DUCTUS_H5_UNSET_DB}\n");
  dir_.write("p/resources.yaml",
             "apis:\n  lab: { url: \"http://${env:DUCTUS_H5_UNSET_HOST}/in\" }\n");
  fs::path file = dir_.write("message.in", kAdt);
  auto r = ductus::test::runChild(
      {"/bin/sh", "-c",
       "env -u DUCTUS_H5_UNSET_DB -u DUCTUS_H5_UNSET_HOST " +
           std::string(ductus::test::ductusBinary()) + " try '" + (dir_.root() / "p").string() +
           "' adt-feed '" + file.string() + "' 2>&1"});
  EXPECT_EQ(exitCode(r), 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("    PID|1||12345^^^H||DOE^John\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("has errors")));
}

TEST_F(TryCommand, AnUnknownInterfaceIsAUsageError) {
  auto r = tryIt(example("adt-feed"), "adt-fed", kAdt);
  EXPECT_EQ(exitCode(r), 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("has no interface named adt-fed (it has: adt-feed)"));
}

}  // namespace
}  // namespace ductus::config::test
