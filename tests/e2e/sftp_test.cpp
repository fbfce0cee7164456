// An SFTP source and destination in a real engine against a real OpenSSH
// server (tests/support/sshd_server.h), issue #32: a file of 5,000 HL7
// records in outbox/ (split: records, move_to: done/) arrives in inbox/ as
// 5,000 files "{id}.hl7" on the same server, with a kill -9 of the engine in
// the middle of the file; a wrong host_key takes nothing and the log says
// the key did not match; a password sign-in works too.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/sshd_server.h"
#include "tests/support/test_database.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The server's sign-in for a project: the user's key (a file the project
// holds) or the password.
std::string serverYaml(const SshdServer& sshd, bool password, const std::string& hostKey) {
  std::string y = "host: " + sshd.host() + ", port: " + std::to_string(sshd.port()) +
                  ", user: " + sshd.user() + ", host_key: \"" + hostKey + "\"";
  return y + (password ? ", password: \"" + sshd.password() + "\"" : ", private_key: keys/lab");
}

std::map<std::string, std::string> projectFiles(const SshdServer& sshd, bool password,
                                                const std::string& hostKey) {
  std::ifstream key(sshd.privateKeyFile());
  std::stringstream pem;
  pem << key.rdbuf();
  std::string server = serverYaml(sshd, password, hostKey);
  return {
      {"ductus.yaml", engineYaml()},
      {"keys/lab", pem.str()},
      {"interfaces/lab/interface.yaml",
       "source:\n  sftp: { " + server +
           ", path: outbox/, pattern: \"*.hl7\", poll: 200ms, move_to: done/, split: records }\n"
           "format: hl7v2\ndestination:\n  sftp: { " +
           server + ", path: inbox/, name: \"{id}.hl7\" }\n"},
      {"interfaces/lab/transform.js", kPassThrough},
  };
}

std::string records(int n) {
  std::string out;
  for (int i = 1; i <= n; ++i) out += hl7("C-" + std::to_string(i));
  return out;
}

// Written under a dot-name, then renamed: never seen half written.
void drop(const SshdServer& sshd, const std::string& relative, const std::string& name,
          const std::string& bytes) {
  fs::path folder = sshd.makeFolder(relative);
  std::ofstream(folder / ("." + name), std::ios::binary) << bytes;
  fs::rename(folder / ("." + name), folder / name);
}

// MSH-10 of every file in inbox/, and how many files are temporaries.
std::multiset<std::string> controlIds(const fs::path& inbox, size_t* temporaries) {
  std::multiset<std::string> ids;
  *temporaries = 0;
  std::error_code ec;
  if (!fs::exists(inbox, ec)) return ids;
  for (auto& e : fs::directory_iterator(inbox, ec)) {
    std::string name = e.path().filename().string();
    if (name[0] == '.' || name.find(".hl7") != name.size() - 4) {
      ++*temporaries;
      continue;
    }
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string msh = ss.str().substr(0, ss.str().find('\r'));
    size_t at = 0;
    for (int field = 0; field < 9 && at != std::string::npos; ++field) at = msh.find('|', at + 1);
    if (at != std::string::npos) ids.insert(msh.substr(at + 1, msh.find('|', at + 1) - at - 1));
  }
  return ids;
}

TEST(SftpEndToEnd, FiveThousandRecordsArriveOnceEachDespiteAKillMidFile) {
  SshdServer sshd;
  ASSERT_TRUE(sshd.start()) << sshd.log();
  TestDatabase db;
  TempProject project(projectFiles(sshd, false, sshd.hostKeyLine()));
  const int n = 5000;
  drop(sshd, "outbox", "lab.hl7", records(n));
  auto started = std::chrono::steady_clock::now();
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(
      waitFor([&] { return std::stoi(db.value("SELECT count(*) FROM messages")) >= 1000; }, 60s))
      << engine.log();
  engine.kill9();
  ASSERT_LT(std::stoi(db.value("SELECT count(*) FROM messages")), n) << "not mid-file";
  ASSERT_TRUE(engine.start());
  size_t temporaries = 0;
  ASSERT_TRUE(waitFor(
      [&] {
        return controlIds(sshd.folder() / "inbox", &temporaries).size() >= static_cast<size_t>(n);
      },
      180s))
      << engine.log();
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
  auto ids = controlIds(sshd.folder() / "inbox", &temporaries);
  std::set<std::string> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(n));
  for (int i = 1; i <= n; ++i)
    if (!distinct.count("C-" + std::to_string(i))) ADD_FAILURE() << "missing C-" << i;
  EXPECT_EQ(temporaries, 0u) << "a temporary file left in inbox/";
  EXPECT_TRUE(fs::exists(sshd.folder() / "done" / "lab.hl7"));
  EXPECT_FALSE(fs::exists(sshd.folder() / "outbox" / "lab.hl7"));
  std::cout << "5,000 records over SFTP with a kill -9: "
            << std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() -
                                                                started)
                   .count()
            << " s\n";
}

TEST(SftpEndToEnd, AWrongHostKeyTakesNothingAndTheLogSaysTheKeyDidNotMatch) {
  SshdServer sshd;
  ASSERT_TRUE(sshd.start()) << sshd.log();
  TestDatabase db;
  TempProject project(projectFiles(
      sshd, false,
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkAEJ0mG8EKv4n5kM1bXo1mOMoZ4T6rGqDfWl3RO6pA"));
  drop(sshd, "outbox", "lab.hl7", records(3));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  ASSERT_TRUE(waitFor([&] { return engine.log().find("did not match") != std::string::npos; }, 30s))
      << engine.log();
  std::this_thread::sleep_for(1s);  // several polls
  EXPECT_EQ(db.value("SELECT count(*) FROM messages"), "0");
  EXPECT_TRUE(fs::exists(sshd.folder() / "outbox" / "lab.hl7"));
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

TEST(SftpEndToEnd, APasswordSignInWorksToo) {
  SshdServer sshd;
  ASSERT_TRUE(sshd.start()) << sshd.log();
  TestDatabase db;
  TempProject project(projectFiles(sshd, true, sshd.hostKeyLine()));
  drop(sshd, "outbox", "lab.hl7", records(3));
  EngineProcess engine(project.root(), db.url());
  ASSERT_TRUE(engine.start());
  size_t temporaries = 0;
  ASSERT_TRUE(
      waitFor([&] { return controlIds(sshd.folder() / "inbox", &temporaries).size() >= 3; }, 60s))
      << engine.log();
  EXPECT_TRUE(fs::exists(sshd.folder() / "done" / "lab.hl7"));
  EXPECT_EQ(engine.terminate(), 0) << engine.log();
}

}  // namespace
}  // namespace ductus::test
