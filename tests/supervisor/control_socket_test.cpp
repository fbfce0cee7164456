// The engine's control socket (issue #21) on a real Unix socket, with an
// EngineView of the test's own: the file's mode, a status answered as JSON,
// a line too long refused, a stale socket replaced and a live one kept,
// a peer of another uid refused (root only: it needs a second user).
#include "supervisor/control_socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/engine_view.h"
#include "common/fd.h"
#include "ctl/client.h"
#include "ctl/protocol.h"
#include "tests/support/exit_status.h"
#include "tests/support/loop_thread.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ctl::controlRequest;
using supervisor::ControlSocket;
using ::testing::HasSubstr;

class FakeView : public api::EngineView {
 public:
  api::EngineState state() const override { return api::EngineState::Serving; }
  api::EngineInfo engine() const override {
    api::EngineInfo e;
    e.startedAt = std::chrono::system_clock::now() - std::chrono::seconds(90);
    e.workers.push_back({"shared", 0, 4242, "running", 3, 0});
    return e;
  }
  void interfaces(std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) override {
    api::InterfaceInfo f;
    f.name = "adt-feed";
    f.source = "mllp";
    f.state = "running";
    f.gateOpen = true;
    f.received = 12;
    api::DestinationInfo d;
    d.name = "lab";
    d.sent = 5;
    f.destinations.push_back(d);
    done(std::vector<api::InterfaceInfo>{f});
  }
  void interfacesWithPending(
      std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) override {
    interfaces([done](Result<std::vector<api::InterfaceInfo>> r) {
      for (auto& f : *r) f.destinations[0].pending = 7;
      done(std::move(r));
    });
  }
};

class ControlSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-ctl-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = (dir_ / "control").string();
  }
  void TearDown() override {
    loop_.run([this] { socket_.reset(); });
    fs::remove_all(dir_);
  }
  Status listen() {
    Status s;
    loop_.run([&] {
      socket_ = std::make_unique<ControlSocket>(loop_.loop(), view_);
      s = socket_->listen(path_);
    });
    return s;
  }
  // A raw client: connected, or an invalid Fd.
  Fd connectRaw() {
    Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.data(), path_.size());
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return Fd();
    timeval tv{10, 0};
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }
  // Everything until the peer closes (or the 10 s receive timeout).
  static std::string readAll(int fd) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    return out;
  }

  LoopThread loop_;
  FakeView view_;
  std::unique_ptr<ControlSocket> socket_;
  fs::path dir_;
  std::string path_;
};

TEST_F(ControlSocketTest, IsOwnerOnlyAndAnswersStatusAsJson) {
  ASSERT_TRUE(listen()) << listen().error().message;
  struct stat st {};
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto a = controlRequest(path_, {{"request", "status"}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ((*a)["ok"], true) << a->dump();
  EXPECT_EQ((*a)["engine"]["pid"], getpid());
  EXPECT_EQ((*a)["engine"]["state"], "serving");
  EXPECT_GE((*a)["engine"]["uptimeSeconds"].get<int64_t>(), 89);
  EXPECT_EQ((*a)["workers"][0]["pid"], 4242);
  EXPECT_EQ((*a)["workers"][0]["restarts"], 3);
  auto& f = (*a)["interfaces"][0];
  EXPECT_EQ(f["name"], "adt-feed");
  EXPECT_EQ(f["intake"], "open");
  EXPECT_EQ(f["destinations"][0]["pending"], 7);
  EXPECT_EQ(f["destinations"][0]["sent"], 5);

  auto i = controlRequest(path_, {{"request", "interfaces"}});
  ASSERT_TRUE(i) << i.error().message;
  EXPECT_EQ((*i)["interfaces"][0]["name"], "adt-feed");
  EXPECT_FALSE(i->contains("engine"));

  auto unknown = controlRequest(path_, {{"request", "frobnicate"}});
  ASSERT_TRUE(unknown);
  EXPECT_EQ((*unknown)["ok"], false);
  EXPECT_EQ((*unknown)["code"], "unknown_request");
  EXPECT_THAT((*unknown)["error"].get<std::string>(), HasSubstr("status, interfaces"));
}

// Several requests on one connection, the last before the peer's EOF:
// each answered, in order.
TEST_F(ControlSocketTest, AnswersPipelinedRequestsInOrder) {
  ASSERT_TRUE(listen());
  Fd fd = connectRaw();
  ASSERT_TRUE(fd.valid());
  std::string lines = "{\"request\":\"interfaces\"}\nnot json\n{\"request\":\"status\"}\n";
  ASSERT_EQ(send(fd.get(), lines.data(), lines.size(), 0), static_cast<ssize_t>(lines.size()));
  shutdown(fd.get(), SHUT_WR);
  std::string all = readAll(fd.get());
  std::vector<json> answers;
  for (size_t at = 0, nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1)
    answers.push_back(json::parse(all.substr(at, nl - at)));
  ASSERT_EQ(answers.size(), 3u) << all;
  EXPECT_TRUE(answers[0].contains("interfaces"));
  EXPECT_EQ(answers[1]["code"], "bad_request");
  EXPECT_TRUE(answers[2].contains("engine"));
}

TEST_F(ControlSocketTest, RefusesALineTooLongAndCloses) {
  ASSERT_TRUE(listen());
  Fd fd = connectRaw();
  ASSERT_TRUE(fd.valid());
  std::string big(ctl::kControlMaxLine + 1000, 'x');
  // The engine may close before taking it all; what it said is still read.
  for (size_t off = 0; off < big.size();) {
    ssize_t n = send(fd.get(), big.data() + off, big.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string all = readAll(fd.get());
  ASSERT_NE(all.find('\n'), std::string::npos) << all;
  json answer = json::parse(all.substr(0, all.find('\n')));
  EXPECT_EQ(answer["ok"], false);
  EXPECT_EQ(answer["code"], "too_long");
  EXPECT_EQ(all.find('\n') + 1, all.size()) << "one line, then closed";

  // The others are still served.
  auto a = controlRequest(path_, {{"request", "status"}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ((*a)["ok"], true);
}

// An engine killed with -9 leaves its socket file: nobody accepts on it,
// so the next start replaces it. One another engine answers on is kept.
TEST_F(ControlSocketTest, ReplacesAStaleSocketButNotALiveOne) {
  {
    Fd dead(socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.data(), path_.size());
    ASSERT_EQ(bind(dead.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ASSERT_TRUE(fs::exists(path_));
  auto s = listen();
  ASSERT_TRUE(s) << s.error().message;
  auto a = controlRequest(path_, {{"request", "status"}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ((*a)["ok"], true);

  Status second;
  loop_.run([&] {
    ControlSocket other(loop_.loop(), view_);
    second = other.listen(path_);
  });
  ASSERT_FALSE(second);
  EXPECT_THAT(second.error().message, HasSubstr("another engine answers"));
  // The refused one did not take the file away from the live one.
  auto again = controlRequest(path_, {{"request", "status"}});
  ASSERT_TRUE(again) << again.error().message;

  loop_.run([this] { socket_.reset(); });
  EXPECT_FALSE(fs::exists(path_)) << "a clean stop removes its socket";
}

TEST_F(ControlSocketTest, ClientSaysTheEngineIsNotRunning) {
  auto a = controlRequest(path_, {{"request", "status"}});
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "the engine isn't running (no control socket at " + path_ + ")");
}

// SO_PEERCRED: a peer of another uid that got past the file's mode (made
// 0666 here) hears one refusal line and is closed.
TEST_F(ControlSocketTest, RefusesAPeerOfAnotherUid) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  ASSERT_TRUE(listen());
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    // Only system calls from here: the parent has threads.
    close(pipefd[0]);
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path_.data(), path_.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(4);
    const char req[] = "{\"request\":\"status\"}\n";
    (void)!send(fd, req, sizeof req - 1, MSG_NOSIGNAL);  // it may be closed already
    shutdown(fd, SHUT_WR);  // served or not, the engine closes after its answer
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
      (void)!write(pipefd[1], buf, static_cast<size_t>(n));
    _exit(0);
  }
  close(pipefd[1]);
  std::string heard = readAll(pipefd[0]);
  close(pipefd[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(exitedWith(status, 0));
  ASSERT_NE(heard.find('\n'), std::string::npos) << heard;
  json answer = json::parse(heard.substr(0, heard.find('\n')));
  EXPECT_EQ(answer["ok"], false);
  EXPECT_EQ(answer["code"], "forbidden");
  EXPECT_EQ(answer["error"], "permission denied: the engine runs as uid 0");
  EXPECT_EQ(heard.find("interfaces"), std::string::npos) << "nothing else said: " << heard;
}

}  // namespace
}  // namespace ductus::test
