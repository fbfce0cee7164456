// What a TLS listener of a real engine offers, judged by a scanner we did
// not write (issue #30): Debian's testssl.sh (`testssl`) against the TLS
// MLLP listener and against the API over HTTPS. From its JSON: no SSL 2/3,
// TLS 1.0 or 1.1; TLS 1.2 and 1.3 offered; none of the weak cipher
// categories (NULL, anonymous, export, LOW, 3DES/IDEA, the obsoleted CBC
// ones). Its own summary lines go to the test's output, for a reader who
// wants testssl's words rather than ours. About 10-20 s a scan.
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/mllp_project.h"
#include "tests/support/ports.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;

bool testsslInstalled() { return runSplit({"sh", "-c", "command -v testssl"}).code == 0; }

// testssl's findings by id ("TLS1_1" -> "not offered"), and its report.
struct Scan {
  std::map<std::string, std::string> findings;
  std::string report;
};

// The fastest set of testssl's options that still says which protocols are
// offered (--protocols) and which cipher categories (--std); --fast leaves
// out checks neither needs, --nodns min the reverse lookup. `timeout` in
// case a scan hangs: a failed test, not a stuck run.
Scan scan(uint16_t port, const fs::path& dir) {
  fs::path json = dir / ("testssl-" + std::to_string(port) + ".json");
  auto r = runSplit({"timeout", "180", "testssl", "--protocols", "--std", "--fast", "--quiet",
                     "--nodns", "min", "--color", "0", "--warnings", "off", "--jsonfile",
                     json.string(), "127.0.0.1:" + std::to_string(port)});
  Scan s;
  s.report = r.out;
  // Its summary lines, as testssl prints them, into the test's log.
  std::istringstream lines(r.out);
  std::string line;
  bool summary = false;
  while (std::getline(lines, line)) {
    if (line.find("Start ") != std::string::npos) summary = true;
    if (summary && !line.empty()) std::cout << "testssl: " << line << "\n";
  }
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  std::ifstream in(json);
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(doc.is_array()) << "no JSON from testssl at " << json << "\n" << r.out << r.err;
  if (!doc.is_array()) return s;
  for (const auto& f : doc) {
    if (f.contains("id") && f.contains("finding"))
      s.findings[f["id"].get<std::string>()] = f["finding"].get<std::string>();
  }
  return s;
}

// "offered", "offered with final", "offered (OK)": the protocol or category
// is there; "not offered": it isn't. Anything else (not tested, an error)
// is neither, and fails both checks.
std::string findingOf(const Scan& s, const std::string& id) {
  auto it = s.findings.find(id);
  return it == s.findings.end() ? "(no finding)" : it->second;
}
bool offered(const Scan& s, const std::string& id) {
  return findingOf(s, id).rfind("offered", 0) == 0;
}
bool notOffered(const Scan& s, const std::string& id) {
  return findingOf(s, id).rfind("not offered", 0) == 0;
}

void expectOnlyModernTls(const Scan& s) {
  for (const char* id : {"SSLv2", "SSLv3", "TLS1", "TLS1_1"})
    EXPECT_TRUE(notOffered(s, id)) << id << ": " << findingOf(s, id) << "\n" << s.report;
  for (const char* id : {"TLS1_2", "TLS1_3"})
    EXPECT_TRUE(offered(s, id)) << id << ": " << findingOf(s, id) << "\n" << s.report;
  // The weak categories of --std: NULL, anonymous, export, LOW (64-bit, DES,
  // RC2/RC4), 3DES/IDEA, and AVERAGE ("Obsolete CBC ciphers").
  for (const char* id : {"cipherlist_NULL", "cipherlist_aNULL", "cipherlist_EXPORT",
                         "cipherlist_LOW", "cipherlist_3DES_IDEA", "cipherlist_AVERAGE"})
    EXPECT_TRUE(notOffered(s, id)) << id << ": " << findingOf(s, id) << "\n" << s.report;
  EXPECT_TRUE(offered(s, "cipherlist_STRONG")) << findingOf(s, "cipherlist_STRONG") << "\n"
                                               << s.report;
}

// One engine with both listeners in TLS: an MLLP source and the API, the
// same certificates: entry, issued by a throwaway CA.
class TestsslScan : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testsslInstalled()) {
      GTEST_SKIP() << "testssl is not installed (Debian's testssl.sh; scripts/install-deps.sh)";
    }
    char tmpl[] = "/tmp/ductus-e2e-testssl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    TestCa ca(dir_ / "ca");
    auto server = ca.issue("server", "/CN=ductus", {"localhost"}, {"127.0.0.1"});
    mllp_ = freePort();
    api_ = freePort();
    MllpProject p{.port = mllp_};
    auto yaml = engineYaml();
    yaml.replace(
        yaml.find("api: { listen: off }"), 20,
        "api: { listen: 127.0.0.1:" + std::to_string(api_) + ", tls: { certificate: server } }");
    p.engine = yaml;
    auto f = p.files();
    f[p.interfacePath()] = "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(mllp_) +
                           ", tls: { certificate: server } }\nformat: hl7v2\n" + p.destination;
    f["resources.yaml"] = "certificates:\n  server: { cert_file: " + server.cert.string() +
                          ", key_file: " + server.key.string() + " }\n";
    project_.emplace(f);
    engine_.emplace(project_->root(), db_.url());
    ASSERT_TRUE(engine_->start()) << engine_->log();
  }
  void TearDown() override {
    if (engine_) {
      EXPECT_EQ(engine_->terminate(), 0) << engine_->log();
    }
    engine_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  fs::path dir_;
  uint16_t mllp_ = 0, api_ = 0;
  TestDatabase db_;
  std::optional<TempProject> project_;
  std::optional<EngineProcess> engine_;
};

TEST_F(TestsslScan, TheMllpListenerOffersOnlyTls12And13AndNoWeakCipher) {
  expectOnlyModernTls(scan(mllp_, dir_));
}

TEST_F(TestsslScan, TheApiOverHttpsOffersOnlyTls12And13AndNoWeakCipher) {
  expectOnlyModernTls(scan(api_, dir_));
}

}  // namespace
}  // namespace ductus::test
