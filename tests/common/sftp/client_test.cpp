// sftp::Client against a real OpenSSH server (tests/support/sshd_server.h):
// the host key checked before anything else is sent, key and password
// sign-in, each request, a kept session, a server that goes away, the
// queue's bound, and a server that never answers.
#include "common/sftp/client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "common/sftp/known_hosts.h"
#include "tests/support/ports.h"
#include "tests/support/processes.h"
#include "tests/support/run_until.h"
#include "tests/support/sshd_server.h"
#include "tests/support/test_env.h"

namespace ductus::sftp {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Another server's key: a real ed25519 key, not the test sshd's.
const std::string kOtherKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAkUt5CgstUNshcz4pink7vlO2LXNGaqbB//9HWYoX6I";

using ::ductus::test::fileText;

void writeFile(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

class SftpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    auto st = sshd_.start();
    ASSERT_TRUE(st) << st.error().message;
  }
  void TearDown() override {
    client_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  Client& client(ServerSettings s, size_t maxQueued = Client::kDefaultMaxQueued) {
    client_ = std::make_unique<Client>(&loop_, std::move(s), "test", maxQueued);
    return *client_;
  }

  // Runs one request to its answer.
  template <typename T, typename Start>
  Result<T> wait(Start start) {
    std::optional<Result<T>> got;
    start([&](Result<T> r) { got.emplace(std::move(r)); });
    EXPECT_FALSE(got) << "answered inside the call";
    EXPECT_TRUE(test::runUntil(
        &loop_, [&] { return got.has_value(); }, 30s));
    return got ? std::move(*got) : Result<T>(Error{"no answer"});
  }
  Status put(const std::string& tmp, const std::string& final, const std::string& bytes) {
    return wait<void>([&](auto cb) { client_->put(tmp, final, bytes, 0640, cb); });
  }
  Result<std::vector<Entry>> list(const std::string& folder) {
    return wait<std::vector<Entry>>([&](auto cb) { client_->list(folder, cb); });
  }
  Result<Entry> stat(const std::string& path) {
    return wait<Entry>([&](auto cb) { client_->stat(path, cb); });
  }
  Result<std::string> read(const std::string& path, uint64_t offset, size_t max) {
    return wait<std::string>([&](auto cb) { client_->read(path, offset, max, cb); });
  }

  uv_loop_t loop_{};
  test::SshdServer sshd_;
  std::unique_ptr<Client> client_;
};

TEST_F(SftpClientTest, AKeySignInListsStatsAndReadsAtOffsetsOverOneOpenHandle) {
  fs::create_directories(sshd_.folder() / "outbox" / "sub");
  std::string big(1 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  writeFile(sshd_.folder() / "outbox" / "big.hl7", big);
  writeFile(sshd_.folder() / "outbox" / "small.txt", "abc");
  fs::create_symlink("/etc/passwd", sshd_.folder() / "outbox" / "link");
  client(sshd_.keySettings());

  auto l = list("outbox");
  ASSERT_TRUE(l) << l.error().message;
  std::map<std::string, Entry> byName;
  for (auto& e : *l) byName[e.name] = e;
  ASSERT_EQ(byName.size(), 4u) << "no . or ..";
  EXPECT_EQ(byName["big.hl7"].type, Entry::Type::File);
  EXPECT_EQ(byName["big.hl7"].size, big.size());
  EXPECT_GT(byName["big.hl7"].mtimeNs, 0);
  EXPECT_EQ(byName["sub"].type, Entry::Type::Folder);
  EXPECT_EQ(byName["link"].type, Entry::Type::Link) << "a link is never followed";

  auto s = stat("outbox/small.txt");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "small.txt");
  EXPECT_EQ(s->size, 3u);
  auto missing = stat("outbox/none.txt");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::NotFound) << missing.error().message;

  // In order, 256 KB at a time, over one open handle: the file removed on
  // the server after the first read is still read to its end (a client
  // that opened it again for each read would find it gone).
  std::string got;
  for (;;) {
    auto r = read("outbox/big.hl7", got.size(), 256 << 10);
    ASSERT_TRUE(r) << r.error().message;
    if (r->empty()) break;
    got += *r;
    fs::remove(sshd_.folder() / "outbox" / "big.hl7");
  }
  EXPECT_EQ(got, big);
  // Another request closes it; from an offset, as a source resumes.
  writeFile(sshd_.folder() / "outbox" / "big.hl7", big);
  ASSERT_TRUE(stat("outbox/small.txt"));
  auto tail = read("outbox/big.hl7", big.size() - 10, 100);
  ASSERT_TRUE(tail) << tail.error().message;
  EXPECT_EQ(*tail, big.substr(big.size() - 10));
  EXPECT_EQ(client_->sessionsOpened(), 1u);
}

TEST_F(SftpClientTest,
       PutReplacesAFileAndLeavesNoTemporaryRenameRefusesATakenNameRemoveAndMakeFolders) {
  client(sshd_.keySettings());
  auto made = wait<void>([&](auto cb) { client_->makeFolders("in/a/b", 0750, cb); });
  ASSERT_TRUE(made) << made.error().message;
  auto again = wait<void>([&](auto cb) { client_->makeFolders("in/a/b", 0750, cb); });
  EXPECT_TRUE(again) << "an existing folder is fine: " << again.error().message;
  ASSERT_TRUE(fs::is_directory(sshd_.folder() / "in/a/b"));

  ASSERT_TRUE(put("in/a/b/.1.hl7", "in/a/b/1.hl7", "first"));
  auto replaced = put("in/a/b/.1.hl7", "in/a/b/1.hl7", "second");
  ASSERT_TRUE(replaced) << replaced.error().message;
  EXPECT_EQ(fileText(sshd_.folder() / "in/a/b/1.hl7"), "second");
  EXPECT_FALSE(fs::exists(sshd_.folder() / "in/a/b/.1.hl7"));
  EXPECT_EQ(fs::status(sshd_.folder() / "in/a/b/1.hl7").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);

  ASSERT_TRUE(put("in/.2.hl7", "in/2.hl7", "two"));
  auto taken = wait<void>([&](auto cb) { client_->rename("in/2.hl7", "in/a/b/1.hl7", cb); });
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().kind, ErrorKind::Invalid) << taken.error().message;
  EXPECT_EQ(fileText(sshd_.folder() / "in/a/b/1.hl7"), "second");
  auto moved = wait<void>([&](auto cb) { client_->rename("in/2.hl7", "in/a/2.hl7", cb); });
  ASSERT_TRUE(moved) << moved.error().message;
  EXPECT_EQ(fileText(sshd_.folder() / "in/a/2.hl7"), "two");

  auto removed = wait<void>([&](auto cb) { client_->remove("in/a/2.hl7", cb); });
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_FALSE(fs::exists(sshd_.folder() / "in/a/2.hl7"));
  auto gone = wait<void>([&](auto cb) { client_->remove("in/a/2.hl7", cb); });
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, ErrorKind::NotFound) << gone.error().message;

  // Into a folder that is not there: NotFound, and nothing left behind.
  auto nowhere = put("none/.3.hl7", "none/3.hl7", "x");
  ASSERT_FALSE(nowhere);
  EXPECT_EQ(nowhere.error().kind, ErrorKind::NotFound) << nowhere.error().message;
  EXPECT_EQ(client_->sessionsOpened(), 1u);
}

TEST_F(SftpClientTest, APasswordSignsInAndAWrongOneIsDeniedNamingTheUser) {
  client(sshd_.passwordSettings());
  ASSERT_TRUE(put(".p.txt", "p.txt", "by password"));
  EXPECT_EQ(fileText(sshd_.folder() / "p.txt"), "by password");

  auto wrong = sshd_.passwordSettings();
  wrong.password = "not-it";
  client(wrong);
  auto r = put(".q.txt", "q.txt", "x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Denied) << r.error().message;
  EXPECT_NE(r.error().message.find(sshd_.user()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("password"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(sshd_.folder() / "q.txt"));
}

TEST_F(SftpClientTest, AnInlineKeyWithAWrongPasswordBesideItSignsInByTheKey) {
  auto s = sshd_.keySettings();
  s.privateKeyFile.clear();
  s.privateKeyPem = sshd_.privateKeyPem();
  s.password = "not-it";
  client(s);
  auto r = put(".k.txt", "k.txt", "by key");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(fileText(sshd_.folder() / "k.txt"), "by key");
}

TEST_F(SftpClientTest, AWrongHostKeyIsDeniedWithTheServersFingerprintBeforeTheUserIsSent) {
  auto s = sshd_.keySettings();
  s.hostKeys = {kOtherKey};
  client(s);
  auto r = list(".");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Denied) << r.error().message;
  // The fingerprint the server showed, as ssh-keygen -l prints it.
  auto keygen = test::runSplit(
      {"ssh-keygen", "-l", "-f", (sshd_.folder().parent_path() / "host_key.pub").string()});
  ASSERT_EQ(keygen.code, 0) << keygen.err;
  std::string shown = keygen.out.substr(keygen.out.find("SHA256:"));
  shown = shown.substr(0, shown.find(' '));
  EXPECT_NE(r.error().message.find(shown), std::string::npos)
      << r.error().message << " / " << shown;
  EXPECT_NE(r.error().message.find("host key did not match"), std::string::npos)
      << r.error().message;
  // sshd saw a connection and no sign-in: the user's name was never sent.
  std::string log = sshd_.log();
  EXPECT_EQ(log.find(sshd_.user()), std::string::npos) << log;
  EXPECT_EQ(client_->sessionsOpened(), 0u);
}

TEST_F(SftpClientTest, AKnownHostsFileHashedAsSshKeyscanWritesItPinsTheKey) {
  fs::path kh = sshd_.folder().parent_path() / "known_hosts";
  writeFile(kh, "# ours\nother.example.org " + kOtherKey + "\n[127.0.0.1]:" +
                    std::to_string(sshd_.port()) + " " + sshd_.hostKeyLine() + "\n");
  auto hashed = test::runSplit({"ssh-keygen", "-H", "-f", kh.string()});
  ASSERT_EQ(hashed.code, 0) << hashed.err;
  ASSERT_EQ(fileText(kh).find("127.0.0.1"), std::string::npos) << "hashed";
  auto s = sshd_.keySettings();
  s.hostKeys.clear();
  s.knownHostsFile = kh;
  client(s);
  auto r = list(".");
  EXPECT_TRUE(r) << r.error().message;

  // The same file without this server's line: refused, naming the file.
  writeFile(kh, "other.example.org " + kOtherKey + "\n");
  client(s);
  auto refused = list(".");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::Denied);
  EXPECT_NE(refused.error().message.find(kh.string()), std::string::npos)
      << refused.error().message;
}

TEST_F(SftpClientTest, AThousandPutsGoOverOneSession) {
  client(sshd_.keySettings());
  int done = 0, failed = 0;
  std::string firstError;
  for (int i = 0; i < 1000; ++i) {
    std::string name = std::to_string(i) + ".hl7";
    // Queued 50 at a time: under the default bound of 64.
    client_->put("." + name, name, "MSH|" + std::to_string(i), 0640, [&](Status st) {
      ++done;
      if (!st && failed++ == 0) firstError = st.error().message;
    });
    if (i % 50 == 49) {
      ASSERT_TRUE(test::runUntil(
          &loop_, [&] { return done == i + 1; }, 60s));
    }
  }
  EXPECT_EQ(failed, 0) << firstError;
  EXPECT_EQ(client_->sessionsOpened(), 1u);
  int files = 0;
  for (auto& e : fs::directory_iterator(sshd_.folder())) {
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
    ++files;
  }
  EXPECT_EQ(files, 1000);
  EXPECT_EQ(fileText(sshd_.folder() / "999.hl7"), "MSH|999");
}

TEST_F(SftpClientTest, AServerThatGoesAwayIsUnavailableAndTheNextRequestOpensANewSession) {
  client(sshd_.keySettings());
  ASSERT_TRUE(put(".1", "1", "one"));
  // The server restarted while the session sat idle: the kept session is
  // found lost, and the request is tried once more on a new one.
  ASSERT_TRUE(sshd_.restart());
  auto afterRestart = put(".2", "2", "two");
  ASSERT_TRUE(afterRestart) << afterRestart.error().message;
  EXPECT_EQ(client_->sessionsOpened(), 2u);

  sshd_.stop();
  auto down = put(".3", "3", "three");
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().kind, ErrorKind::Unavailable) << down.error().message;
  EXPECT_NE(down.error().message.find(sshd_.keySettings().describe()), std::string::npos)
      << down.error().message;
  ASSERT_TRUE(sshd_.start());
  auto back = put(".3", "3", "three");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(fileText(sshd_.folder() / "3"), "three");
  EXPECT_EQ(client_->sessionsOpened(), 3u);
}

TEST_F(SftpClientTest, BeyondTheQueuesBoundARequestIsBusyAndAnsweredLater) {
  client(sshd_.keySettings(), 2);
  int busy = 0, ok = 0;
  bool insideCall = true;
  bool answeredInside = false;
  for (int i = 0; i < 10; ++i) {
    client_->stat(".", [&](Result<Entry> r) {
      answeredInside = answeredInside || insideCall;
      if (r) {
        ++ok;
      } else if (r.error().kind == ErrorKind::Busy) {
        ++busy;
      }
    });
  }
  insideCall = false;
  ASSERT_TRUE(test::runUntil(
      &loop_, [&] { return ok + busy == 10; }, 30s))
      << ok << " " << busy;
  EXPECT_FALSE(answeredInside);
  // The thread may take the first before the rest are queued: at most
  // three run, at least seven are refused.
  EXPECT_GE(busy, 7);
  EXPECT_GE(ok, 2);
}

// A listener that takes connections into its backlog and never answers:
// the SSH banner never comes.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A client of the test's sshd, signing in with its key, sent to `silent`.
class SilentServerTest : public SftpClientTest {
 protected:
  Client& clientOf(const SilentServer& silent, std::chrono::milliseconds connectTimeout) {
    auto s = sshd_.keySettings();
    s.port = silent.port();
    s.connectTimeout = connectTimeout;
    return client(s);
  }
};

TEST_F(SilentServerTest, AServerThatNeverAnswersIsUnavailableWithinTheConnectTimeout) {
  SilentServer silent;
  clientOf(silent, 500ms);
  auto start = std::chrono::steady_clock::now();
  auto r = list(".");
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Unavailable) << r.error().message;
  EXPECT_NE(r.error().message.find("no answer in time"), std::string::npos) << r.error().message;
  EXPECT_LT(took, 10s);
}

TEST_F(SilentServerTest, DestroyingTheClientMidRequestReturnsAtOnceAndNeverCallsBack) {
  SilentServer silent;
  clientOf(silent, 20s);
  bool called = false;
  client_->list(".", [&](auto) { called = true; });
  // Let the thread start its handshake with the silent server.
  test::runUntil(
      &loop_, [] { return false; }, 200ms);
  auto start = std::chrono::steady_clock::now();
  client_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  test::runUntil(
      &loop_, [] { return false; }, 200ms);
  EXPECT_FALSE(called);
}

// A test process killed before its SshdServer's destructor leaves its user
// behind, and a later test process may get the same pid. CI once failed on
// "useradd: user 'dt21100x0' already exists" when users were named by the
// pid and a count alone: here users with those names are there first.
TEST(SshdServerUsers, AUserLeftBehindUnderThisPidIsNoObstacle) {
  std::vector<std::string> left;
  for (int n = 0; n < 32; ++n) {
    std::string user = "dt" + std::to_string(::getpid()) + "x" + std::to_string(n);
    if (::ductus::test::runSplit({"useradd", "-M", "-s", "/usr/sbin/nologin", user}).code == 0)
      left.push_back(user);
  }
  {
    ::ductus::test::SshdServer sshd;
    auto st = sshd.start();
    EXPECT_TRUE(st) << st.error().message;
  }
  for (auto& user : left) ::ductus::test::runSplit({"userdel", "-f", user});
}

TEST(KnownHosts, ReadsPatternsPortsNegationAndMarkersAsOpenSshDoes) {
  std::string text =
      "# a comment\n"
      "\n"
      "lab.example.org,10.0.0.5 ssh-ed25519 AAAA1 comment words\n"
      "[lab.example.org]:2222 ssh-rsa AAAA2\n"
      "*.example.org,!gw.example.org ecdsa-sha2-nistp256 AAAA3\n"
      "@revoked lab.example.org ssh-ed25519 AAAA4\n"
      "@cert-authority *.example.org ssh-ed25519 AAAA5\n";
  EXPECT_EQ(knownHostKeys(text, "lab.example.org", 22),
            (std::vector<std::string>{"ssh-ed25519 AAAA1", "ecdsa-sha2-nistp256 AAAA3"}));
  EXPECT_EQ(knownHostKeys(text, "lab.example.org", 2222),
            (std::vector<std::string>{"ssh-rsa AAAA2"}));
  EXPECT_EQ(knownHostKeys(text, "10.0.0.5", 22), (std::vector<std::string>{"ssh-ed25519 AAAA1"}));
  EXPECT_TRUE(knownHostKeys(text, "gw.example.org", 22).empty());
  EXPECT_TRUE(knownHostKeys(text, "other.org", 22).empty());
  EXPECT_EQ(pinnedKeyTypes({"ssh-ed25519 A", "ssh-rsa B", "ssh-ed25519 C"}),
            (std::vector<std::string>{"ssh-ed25519", "ssh-rsa"}));
}

}  // namespace
}  // namespace ductus::sftp
