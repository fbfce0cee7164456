// `ductus test PROJECT` runs the interfaces' *.test.js in workers with mocks
// and needs no database.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

class TestCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-test-command.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& rel, const std::string& text) {
    auto p = dir_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::filesystem::path dir_;
};

constexpr const char* kTransform =
    "import { db } from 'ductus';\n"
    "export async function transform(msg) {\n"
    "  const rows = await db('patients').query('select mrn from p where id = $1', [msg.get('PID.3.1')]);\n"
    "  msg.set('PID.3.1', rows[0].mrn);\n"
    "  return msg;\n"
    "}\n";

TEST_F(TestCommand, PassingFailingAndUnmockedTestsAreCountedAndAFailureExitsWithOne) {
  write("interfaces/adt/interface.yaml", "name: adt\n");
  write("interfaces/adt/transform.js", kTransform);
  write("interfaces/adt/transform.test.js",
        "import { test, mock, assert, hl7v2, run } from 'ductus';\n"
        "import { transform } from './transform.js';\n"
        "const msg = 'MSH|^~\\\\&|A|B|C|D|x||ADT^A01|1|P|2.5\\rPID|1||42\\r';\n"
        "test('maps the id to the MRN', async () => {\n"
        "  mock.db('patients', (sql, params) => [{ mrn: 'M' + params[0] }]);\n"
        "  const out = await transform(hl7v2.parse(msg));\n"
        "  assert.equal(out.get('PID.3.1'), 'M42');\n"
        "});\n"
        "test('run() classifies like the engine', async () => {\n"
        "  mock.db('patients', []);\n"
        "  const r = await run(transform, msg);\n"
        "  assert.equal(r.kind, 'quarantine');\n"
        "});\n"
        "test('mocks are reset before each test', async () => {\n"
        "  await transform(hl7v2.parse(msg));\n"
        "});\n"
        "test('a plain failure', () => { assert.equal(1 + 1, 3); });\n");
  auto r = runChild({ductusBinary(), "test", dir_.string()});
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_NE(r.out.find("2 passed, 2 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ok   maps the id to the MRN"), std::string::npos) << r.out;
  // The unmocked call says how to mock it.
  EXPECT_NE(r.out.find("mock.db(\"patients\", (sql, params) => rows)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expected 3, got 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("transform.test.js:"), std::string::npos) << r.out;
}

TEST_F(TestCommand, AllPassingExitsWithZero) {
  write("interfaces/a/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/a/transform.test.js",
        "import { test, assert, mock, env, fetch } from 'ductus';\n"
        "test('env and fetch are mocked', async () => {\n"
        "  mock.env('SITE', 'north');\n"
        "  mock.fetch((url) => ({ status: 200, body: url }));\n"
        "  assert.equal(await env('SITE'), 'north');\n"
        "  assert.equal(await (await fetch('https://x/y')).text(), 'https://x/y');\n"
        "});\n");
  auto r = runChild({ductusBinary(), "test", dir_.string()});
  EXPECT_TRUE(exitedWith(r.exitStatus, 0)) << r.out;
  EXPECT_NE(r.out.find("1 passed, 0 failed"), std::string::npos) << r.out;
}

// Tests run with mocks and connect to nothing: a variable the project's
// files name (the database's, a destination's) need not be set.
TEST_F(TestCommand, NeedsNoVariableTheProjectNames) {
  write("ductus.yaml", "database: ${env:DUCTUS_H5_UNSET_DB}\n");
  write("resources.yaml", "apis:\n  lab: { url: \"http://${env:DUCTUS_H5_UNSET_HOST}/in\" }\n");
  write("interfaces/a/interface.yaml",
        "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
        "destination:\n  http: { url: \"http://${env:DUCTUS_H5_UNSET_HOST}/in\" }\n");
  write("interfaces/a/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/a/transform.test.js",
        "import { test } from 'ductus';\ntest('a passes', () => {});\n");
  auto r = runChild({"/bin/sh", "-c",
                     "env -u DUCTUS_H5_UNSET_DB -u DUCTUS_H5_UNSET_HOST " +
                         std::string(ductusBinary()) + " test '" + dir_.string() + "' 2>&1"});
  EXPECT_TRUE(exitedWith(r.exitStatus, 0)) << r.out;
  EXPECT_NE(r.out.find("1 passed, 0 failed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("DUCTUS_H5_UNSET"), std::string::npos) << r.out;
}

TEST_F(TestCommand, ATestFileThatDoesNotLoadIsAFailure) {
  write("interfaces/b/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/b/transform.test.js", "import { test } from 'ductus';\ntest('x', () => { const = 1; });\n");
  auto r = runChild({ductusBinary(), "test", dir_.string()});
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_NE(r.out.find("interfaces/b/transform.test.js:2:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 passed, 1 failed"), std::string::npos) << r.out;
}

TEST_F(TestCommand, Hl7InAFailurePrintsOneSegmentPerLine) {
  write("interfaces/h/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/h/transform.test.js",
        "import { test, assert } from 'ductus';\n"
        "test('compares messages', () => {\n"
        "  assert.equal('MSH|^~\\\\&|A\\rPID|1||42\\r', 'MSH|^~\\\\&|A\\rPID|1||43\\r');\n"
        "});\n");
  auto r = runChild({ductusBinary(), "test", dir_.string()});
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MSH|^~\\&|A\n       PID|1||43\n"), std::string::npos) << r.out;
}

TEST_F(TestCommand, AProjectWithoutTestsWarnsAndExitsWithZero) {
  write("interfaces/a/transform.js", "export const transform = (m) => m;\n");
  auto r = runChild({ductusBinary(), "test", dir_.string()});
  EXPECT_TRUE(exitedWith(r.exitStatus, 0)) << r.out;
  EXPECT_NE(r.out.find("warning: no tests"), std::string::npos) << r.out;
}

TEST_F(TestCommand, InterfaceRunsOneInterfacesTests) {
  write("interfaces/a/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/a/transform.test.js",
        "import { test } from 'ductus';\ntest('a passes', () => {});\n");
  write("interfaces/b/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/b/transform.test.js",
        "import { test, assert } from 'ductus';\ntest('b fails', () => assert.ok(false));\n");
  auto a = runChild({ductusBinary(), "test", "--interface", "a", dir_.string()});
  EXPECT_TRUE(exitedWith(a.exitStatus, 0)) << a.out;
  EXPECT_NE(a.out.find("1 passed, 0 failed"), std::string::npos) << a.out;
  EXPECT_EQ(a.out.find("b fails"), std::string::npos) << a.out;
  auto none = runChild({ductusBinary(), "test", "--interface", "c", dir_.string()});
  EXPECT_TRUE(exitedWith(none.exitStatus, 2)) << none.out;
}

TEST_F(TestCommand, JunitWritesASuitePerFileAndACasePerTestEscaped) {
  write("interfaces/adt/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/adt/transform.test.js",
        "import { test, assert } from 'ductus';\n"
        "test('passes & <logs>', () => { console.log('seen \"here\"'); });\n"
        "test('compares \"messages\"', () => {\n"
        "  assert.equal('MSH|^~\\\\&|A\\rPID|1||<42>\\r', 'MSH|^~\\\\&|A\\rPID|1||43\\r');\n"
        "});\n");
  write("interfaces/broken/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/broken/transform.test.js", "import { test } from 'ductus';\nconst = 1;\n");
  auto report = dir_ / "reports" / "junit.xml";
  std::filesystem::create_directories(report.parent_path());
  auto r = runChild({ductusBinary(), "test", "--junit", report.string(), dir_.string()});
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  // The console is as without --junit.
  EXPECT_NE(r.out.find("1 passed, 2 failed"), std::string::npos) << r.out;

  std::ifstream in(report);
  std::string x((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(x.empty());
  auto has = [&](const std::string& s) { return x.find(s) != std::string::npos; };
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = x.find(s); at != std::string::npos; at = x.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(x.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites ", 0), 0u) << x;
  EXPECT_TRUE(has("<testsuites name=\"ductus test\" tests=\"3\" failures=\"1\" errors=\"1\"")) << x;
  EXPECT_EQ(count("<testsuite "), 2u) << x;
  EXPECT_EQ(count("</testsuite>"), 2u) << x;
  EXPECT_EQ(count("<testcase "), 3u) << x;
  EXPECT_TRUE(x.ends_with("</testsuites>\n")) << x;
  EXPECT_TRUE(has("<testsuite name=\"interfaces/adt/transform.test.js\" tests=\"2\" failures=\"1\" "
                  "errors=\"0\"")) << x;
  EXPECT_TRUE(has("<testcase name=\"passes &amp; &lt;logs&gt;\" classname=\"adt\"/>")) << x;
  EXPECT_TRUE(has("<testcase name=\"compares &quot;messages&quot;\" classname=\"adt\">\n"
                  "      <failure message=\"")) << x;
  // The failure's text: escaped, each HL7 segment on a line of its own.
  EXPECT_TRUE(has("MSH|^~\\&amp;|A\nPID|1||&lt;42&gt;")) << x;
  EXPECT_FALSE(has("\r")) << x;
  EXPECT_TRUE(has("<system-out>seen \"here\"\n</system-out>")) << x;
  // A file that does not load is one case with an error, naming file:line.
  EXPECT_TRUE(has("<testsuite name=\"interfaces/broken/transform.test.js\" tests=\"1\" "
                  "failures=\"0\" errors=\"1\"")) << x;
  EXPECT_TRUE(has("<error message=\"")) << x;
  EXPECT_TRUE(has("interfaces/broken/transform.test.js:2")) << x;
  // Every element that opens is closed.
  EXPECT_EQ(count("<failure "), count("</failure>")) << x;
  EXPECT_EQ(count("<error "), count("</error>")) << x;
  EXPECT_EQ(count("<testcase ") - count("\"/>\n"), count("</testcase>")) << x;
}

TEST_F(TestCommand, JunitThatCannotBeWrittenExitsWithOne) {
  write("interfaces/a/transform.js", "export const transform = (m) => m;\n");
  write("interfaces/a/transform.test.js", "import { test } from 'ductus';\ntest('a', () => {});\n");
  auto r = runChild({ductusBinary(), "test", "--junit", (dir_ / "no/such/dir/j.xml").string(),
                     dir_.string()});
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_NE(r.out.find("1 passed, 0 failed"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ductus::test
