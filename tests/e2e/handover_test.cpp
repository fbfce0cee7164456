// The handover between two engines (issue #21, supervisor/handover.h), with
// real processes: under steady MLLP traffic `ductus handover` refuses no
// connection and loses nothing acknowledged, the new engine serves and the
// old one exits 0; new code that doesn't load leaves the old engine
// running and the command exits 1 with the load error; systemd (a
// NOTIFY_SOCKET of the test's own) hears MAINPID=<new> from the old engine
// and no STOPPING=1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/fd.h"
#include "tests/support/e2e.h"
#include "tests/support/engine_process.h"
#include "tests/support/exit_status.h"
#include "tests/support/mllp_client.h"
#include "tests/support/mllp_project.h"
#include "tests/support/mllp_receiver.h"
#include "tests/support/test_database.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// `ductus handover --control PATH`, its outputs kept apart.
SplitOutput handover(const std::string& control) {
  return runSplit({ductusBinary(), "handover", "--control", control});
}

// "handed over: the new engine runs as pid N" -> N.
pid_t newPidOf(const std::string& out) {
  auto at = out.find("pid ");
  return at == std::string::npos ? -1 : static_cast<pid_t>(std::atoi(out.c_str() + at + 4));
}

// The new engine is the old one's child; once the old one exits it is
// ours (PR_SET_CHILD_SUBREAPER), stopped and reaped at the end.
struct NewEngine {
  pid_t pid = -1;
  ~NewEngine() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 400; ++i) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) return;
      std::this_thread::sleep_for(50ms);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

bool alive(pid_t pid) { return pid > 0 && kill(pid, 0) == 0; }

class Handover : public ::testing::Test {
 protected:
  void SetUp() override {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    char tmpl[] = "/tmp/ductus-handover-XXXXXX";
    dir_ = mkdtemp(tmpl);
    control_ = (dir_ / "control").string();
    port_ = freePort();
    project_ = std::make_unique<TempProject>(
        MllpProject{.port = port_, .destination = mllpDestination(receiver_.port())});
    engine_ = std::make_unique<EngineProcess>(project_->root(), db_.url());
    engine_->setExtraArgs({"--control", control_});
  }
  void TearDown() override {
    engine_.reset();
    fs::remove_all(dir_);
  }

  // One message through the engine, acknowledged AA.
  void sendOne(const std::string& id) {
    auto c = MllpClient::connect("127.0.0.1", port_, 5000ms);
    ASSERT_TRUE(c.ok()) << c.error().message;
    auto ack = c->exchange(hl7(id), 10s);
    ASSERT_TRUE(ack.ok()) << ack.error().message;
    EXPECT_EQ(readAck(*ack).code, "AA");
  }

  bool delivered(const std::string& id) {
    auto got = receiver_.accepted();
    return std::find(got.begin(), got.end(), id) != got.end();
  }

  TestDatabase db_;
  MllpReceiver receiver_;
  fs::path dir_;
  std::string control_;
  uint16_t port_ = 0;
  std::unique_ptr<TempProject> project_;
  std::unique_ptr<EngineProcess> engine_;
};

// Four senders at a steady pace through a handover. Each reconnects when
// its connection is closed (the old engine closes them once answered) and
// sends a message again when it got no ACK; a connect that fails counts as
// a refusal.
TEST_F(Handover, UnderTrafficRefusesNothingAndLosesNothingAcknowledged) {
  ASSERT_TRUE(engine_->start());
  pid_t oldPid = engine_->pid();
  sendOne("before-1");

  std::atomic<bool> stop{false};
  std::atomic<int> refused{0};
  std::mutex mu;
  std::set<std::string> acked;
  std::vector<std::thread> senders;
  for (int s = 0; s < 4; ++s)
    senders.emplace_back([&, s] {
      std::optional<MllpClient> c;
      for (int i = 0; !stop; ++i) {
        std::string id = "s" + std::to_string(s) + "-" + std::to_string(i);
        for (int attempt = 0; attempt < 50 && !stop; ++attempt) {
          if (!c) {
            auto r = MllpClient::connect("127.0.0.1", port_, 2000ms);
            if (!r) {
              ++refused;
              std::this_thread::sleep_for(20ms);
              continue;
            }
            c.emplace(std::move(*r));
          }
          auto ack = c->exchange(hl7(id, "M" + std::to_string(i % 7)), 10s);
          if (!ack) {
            c.reset();  // closed by the old engine: again on a new connection
            continue;
          }
          if (readAck(*ack).code == "AA") {
            std::lock_guard lock(mu);
            acked.insert(id);
            break;
          }
        }
        std::this_thread::sleep_for(5ms);
      }
    });
  std::this_thread::sleep_for(700ms);
  SplitOutput r = handover(control_);
  std::this_thread::sleep_for(700ms);
  stop = true;
  for (auto& t : senders) t.join();

  NewEngine fresh;
  ASSERT_EQ(r.code, 0) << r.out << r.err << engine_->log();
  fresh.pid = newPidOf(r.out);
  ASSERT_GT(fresh.pid, 0) << r.out;
  EXPECT_NE(fresh.pid, oldPid);
  int status = engine_->wait(30s);
  EXPECT_TRUE(exitedWith(status, 0)) << engine_->log();
  EXPECT_TRUE(alive(fresh.pid));

  EXPECT_EQ(refused.load(), 0);
  EXPECT_GT(acked.size(), 40u);
  // Every acknowledged message reaches the destination.
  std::set<std::string> missing;
  waitFor(
      [&] {
        auto got = receiver_.accepted();
        std::set<std::string> seen(got.begin(), got.end());
        missing.clear();
        for (auto& id : acked)
          if (!seen.count(id)) missing.insert(id);
        return missing.empty();
      },
      30s);
  EXPECT_TRUE(missing.empty()) << missing.size() << " acknowledged message(s) not delivered, e.g. "
                               << *missing.begin() << "\n"
                               << engine_->log();

  // The new engine serves: intake, delivery, the control socket.
  sendOne("after-1");
  EXPECT_TRUE(waitFor([&] { return delivered("after-1"); }, 30s)) << engine_->log();
  EXPECT_THAT(engine_->log(), HasSubstr("started: took over 1 interface(s)"));
  EXPECT_TRUE(fs::exists(control_));
}

TEST_F(Handover, CodeThatDoesNotLoadLeavesTheOldEngineRunning) {
  ASSERT_TRUE(engine_->start());
  pid_t oldPid = engine_->pid();
  sendOne("before-1");
  {
    std::ofstream js(project_->root() / "interfaces/adt/transform.js");
    js << "export function transform(msg) { return msg\n";
  }
  SplitOutput r = handover(control_);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("handover failed"));
  EXPECT_THAT(r.err, HasSubstr("transform.js"));
  EXPECT_THAT(r.err, HasSubstr("SyntaxError"));

  // The old engine goes on: it answers, delivers, and its control socket
  // is still there (the new engine's end did not remove it).
  EXPECT_TRUE(alive(oldPid));
  EXPECT_EQ(engine_->wait(1s), -1) << engine_->log();
  sendOne("after-1");
  EXPECT_TRUE(waitFor([&] { return delivered("after-1") && delivered("before-1"); }, 30s))
      << engine_->log();
  EXPECT_TRUE(fs::exists(control_));
  EXPECT_THAT(engine_->log(), HasSubstr("this engine goes on"));

  // Fixed, the next handover goes through.
  {
    std::ofstream js(project_->root() / "interfaces/adt/transform.js");
    js << kPassThrough;
  }
  NewEngine fresh;
  SplitOutput again = handover(control_);
  ASSERT_EQ(again.code, 0) << again.out << again.err << engine_->log();
  fresh.pid = newPidOf(again.out);
  sendOne("after-2");
  EXPECT_TRUE(waitFor([&] { return delivered("after-2"); }, 30s)) << engine_->log();
}

// systemd's end of NOTIFY_SOCKET, with the sender's pid of each datagram
// (SO_PASSCRED, as systemd reads it).
class NotifySocket {
 public:
  NotifySocket() {
    static std::atomic<int> counter{0};
    std::string name = "ductus-handover-notify-" + std::to_string(getpid()) + "-" +
                       std::to_string(++counter);
    fd_ = Fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    address_ = "@" + name;
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    int one = 1;
    setsockopt(fd_.get(), SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
    EXPECT_EQ(bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
  }
  const std::string& address() const { return address_; }

  struct Datagram {
    pid_t from = 0;
    std::string text;
  };
  // Everything that arrives within `quiet` of the one before.
  std::vector<Datagram> drain(std::chrono::milliseconds quiet) {
    std::vector<Datagram> out;
    for (;;) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(quiet.count())) <= 0) return out;
      char buf[4096];
      alignas(cmsghdr) char control[CMSG_SPACE(16 * sizeof(int)) + CMSG_SPACE(sizeof(ucred))];
      iovec iov{buf, sizeof buf};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      ssize_t n = recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
      if (n < 0) return out;
      Datagram d;
      d.text.assign(buf, static_cast<size_t>(n));
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
          ucred cred{};
          std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
          d.from = cred.pid;
        }
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
          size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
          for (size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            close(fd);
          }
        }
      }
      out.push_back(std::move(d));
    }
  }

 private:
  Fd fd_;
  std::string address_;
};

bool hasLine(const std::string& text, const std::string& line) {
  return ("\n" + text + "\n").find("\n" + line + "\n") != std::string::npos;
}

TEST_F(Handover, SystemdHearsTheNewMainPidAndNoStopping) {
  NotifySocket systemd;
  engine_->setEnvironment({{"NOTIFY_SOCKET", systemd.address()}});
  ASSERT_TRUE(engine_->start());
  pid_t oldPid = engine_->pid();
  auto atStart = systemd.drain(500ms);
  ASSERT_FALSE(atStart.empty());

  NewEngine fresh;
  SplitOutput r = handover(control_);
  ASSERT_EQ(r.code, 0) << r.out << r.err << engine_->log();
  fresh.pid = newPidOf(r.out);
  ASSERT_GT(fresh.pid, 0);
  engine_->wait(30s);
  auto seen = systemd.drain(1000ms);

  bool mainPid = false, stopping = false, newReady = false, newStored = false, newEarly = false;
  for (auto& d : seen) {
    if (d.from == oldPid && hasLine(d.text, "MAINPID=" + std::to_string(fresh.pid)))
      mainPid = true;
    if (d.from == oldPid && hasLine(d.text, "STOPPING=1")) stopping = true;
    // Nothing from the new engine before the old one made it the main process.
    if (d.from == fresh.pid && !mainPid) newEarly = true;
    if (d.from == fresh.pid && hasLine(d.text, "READY=1")) newReady = true;
    if (d.from == fresh.pid && hasLine(d.text, "FDSTORE=1") &&
        hasLine(d.text, "FDNAME=mllp-127.0.0.1-" + std::to_string(port_)))
      newStored = true;
  }
  std::string all;
  for (auto& d : seen) all += std::to_string(d.from) + ": " + d.text + "\n---\n";
  EXPECT_TRUE(mainPid) << all;
  EXPECT_FALSE(stopping) << all;
  EXPECT_FALSE(newEarly) << all;
  EXPECT_TRUE(newReady) << all;
  EXPECT_TRUE(newStored) << all;
}

}  // namespace
}  // namespace ductus::test
