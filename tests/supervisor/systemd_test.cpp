// supervisor/systemd.h against a datagram socket the test owns: the
// sd_notify wire format (abstract and path addresses, descriptors attached),
// the names sockets are stored under, and what is removed from the store;
// and the first line a handover's new engine reads, bounded.
#include "supervisor/systemd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <optional>

#include "supervisor/handover.h"

namespace ductus::supervisor {
namespace {

struct Datagram {
  std::string text;
  std::vector<Fd> fds;
};

class Receiver {
 public:
  explicit Receiver(bool abstract) {
    std::string name = "ductus-sd-unit-" + std::to_string(getpid()) + (abstract ? "-a" : "-p");
    fd_ = Fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    socklen_t len = sizeof a;
    if (abstract) {
      address_ = "@" + name;
      std::memcpy(a.sun_path + 1, name.data(), name.size());
      len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    } else {
      address_ = "/tmp/" + name;
      unlink(address_.c_str());
      std::memcpy(a.sun_path, address_.data(), address_.size());
    }
    EXPECT_EQ(bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
  }
  ~Receiver() {
    if (address_[0] == '/') unlink(address_.c_str());
  }
  const std::string& address() const { return address_; }

  std::optional<Datagram> receive(int timeoutMs = 2000) {
    pollfd p{fd_.get(), POLLIN, 0};
    if (poll(&p, 1, timeoutMs) <= 0) return std::nullopt;
    char buf[1024];
    alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
    iovec iov{buf, sizeof buf};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd_.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) return std::nullopt;
    Datagram d{std::string(buf, static_cast<size_t>(n)), {}};
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_type == SCM_RIGHTS)
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          d.fds.emplace_back(fd);
        }
    return d;
  }

 private:
  Fd fd_;
  std::string address_;
};

// Two descriptors that are the same open file (same inode).
bool sameFile(int a, int b) {
  struct stat sa {
  }, sb{};
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
         sa.st_dev == sb.st_dev;
}

TEST(Systemd, NotifiesAnAbstractSocketWithDescriptorsAttached) {
  Receiver r(/*abstract=*/true);
  Systemd sd(r.address(), {});
  ASSERT_TRUE(sd.notifying());
  int pipeFds[2];
  ASSERT_EQ(pipe(pipeFds), 0);
  Fd readEnd(pipeFds[0]), writeEnd(pipeFds[1]);
  sd.storeListener("mllp-127.0.0.1-2575", readEnd.get());
  auto d = r.receive();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, "FDSTORE=1\nFDNAME=mllp-127.0.0.1-2575");
  ASSERT_EQ(d->fds.size(), 1u);
  EXPECT_TRUE(sameFile(d->fds[0].get(), readEnd.get()));
}

TEST(Systemd, NotifiesASocketAtAPath) {
  Receiver r(/*abstract=*/false);
  Systemd sd(r.address(), {});
  ASSERT_TRUE(sd.notify("READY=1\nSTATUS=started").ok());
  auto d = r.receive();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, "READY=1\nSTATUS=started");
  EXPECT_TRUE(d->fds.empty());
}

TEST(Systemd, WithoutANotifySocketNothingIsSent) {
  Systemd sd("", {});
  EXPECT_FALSE(sd.notifying());
  EXPECT_TRUE(sd.notify("READY=1").ok());
  sd.storeListener("mllp-127.0.0.1-1", 0);  // no-op, no crash
}

TEST(Systemd, AMissingOrStrangeSocketIsAnError) {
  EXPECT_FALSE(Systemd("@ductus-nobody-listens-here", {}).notify("READY=1").ok());
  EXPECT_FALSE(Systemd("vsock:2:1234", {}).notify("READY=1").ok());
}

TEST(Systemd, NamesHaveNoColons) {
  EXPECT_EQ(Systemd::socketName("mllp", "127.0.0.1", 2575), "mllp-127.0.0.1-2575");
  EXPECT_EQ(Systemd::socketName("http", "::1", 8080), "http-__1-8080");
}

TEST(Systemd, UntakenSocketsAreClosedAndRemovedAndAFailedStartRemovesAll) {
  Receiver r(/*abstract=*/true);
  int a[2], b[2];
  ASSERT_EQ(pipe(a), 0);
  ASSERT_EQ(pipe(b), 0);
  close(a[1]);
  close(b[1]);
  std::multimap<std::string, Fd> inherited;
  inherited.emplace("mllp-127.0.0.1-1", Fd(a[0]));
  inherited.emplace("http-127.0.0.1-2", Fd(b[0]));
  Systemd sd(r.address(), std::move(inherited));
  Fd taken(sd.takeListener("mllp-127.0.0.1-1"));
  EXPECT_EQ(taken.get(), a[0]);
  EXPECT_EQ(sd.takeListener("mllp-127.0.0.1-1"), -1);

  EXPECT_EQ(sd.dropUntaken(), std::vector<std::string>{"http-127.0.0.1-2"});
  EXPECT_LT(fcntl(b[0], F_GETFD), 0) << "the untaken descriptor is closed";
  auto d = r.receive();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, "FDSTOREREMOVE=1\nFDNAME=http-127.0.0.1-2");

  sd.removeStored();
  d = r.receive();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, "FDSTOREREMOVE=1\nFDNAME=mllp-127.0.0.1-1");
  EXPECT_FALSE(r.receive(200));
}

// A drain takes the stored listeners out of systemd's store (nobody should
// queue for an engine that may be stopped for good); ending it stores them
// again, the same descriptors.
TEST(Systemd, ADrainRemovesTheStoredListenersAndItsEndStoresThemAgain) {
  Receiver r(/*abstract=*/true);
  Systemd sd(r.address(), {});
  int pipeFds[2];
  ASSERT_EQ(pipe(pipeFds), 0);
  Fd readEnd(pipeFds[0]), writeEnd(pipeFds[1]);
  sd.storeListener("mllp-127.0.0.1-2575", readEnd.get());
  ASSERT_TRUE(r.receive());
  sd.unstoreListeners();
  auto d = r.receive();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, "FDSTOREREMOVE=1\nFDNAME=mllp-127.0.0.1-2575");
  sd.restoreListeners();
  d = r.receive();
  ASSERT_TRUE(d);
  EXPECT_EQ(d->text, "FDSTORE=1\nFDNAME=mllp-127.0.0.1-2575");
  ASSERT_EQ(d->fds.size(), 1u);
  EXPECT_TRUE(sameFile(d->fds[0].get(), readEnd.get()));
  EXPECT_FALSE(r.receive(200));
}

}  // namespace
}  // namespace ductus::supervisor

namespace ductus::supervisor {
namespace {

// A handover's new engine reads the old one's From line before anything
// else (supervisor/handover.h). The protocol's lines are short; one that
// never ends is refused at 64 KB instead of growing without bound.
class TakeoverFrom : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    old_ = Fd(sv[0]);
    setenv(kTakeoverVar, std::to_string(sv[1]).c_str(), 1);
    setenv(kListenFdsVar, "0", 1);
    setenv(kListenFdNamesVar, "", 1);
    auto s = Successor::fromEnvironment(systemd_);
    ASSERT_TRUE(s) << s.error().message;
    ASSERT_TRUE(*s);
    successor_ = std::move(*s);
  }
  void say(const std::string& bytes) {
    ASSERT_EQ(::send(old_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  Systemd systemd_{"", {}};
  Fd old_;
  std::unique_ptr<Successor> successor_;
};

TEST_F(TakeoverFrom, TheOldEnginesIdAndPidAreRead) {
  say("{\"type\":\"From\",\"engine\":\"e1\",\"pid\":42}\n");
  auto from = successor_->readFrom(std::chrono::seconds(5));
  ASSERT_TRUE(from) << from.error().message;
  EXPECT_EQ(*from, "e1");
  EXPECT_EQ(successor_->predecessorPid(), 42);
}

TEST_F(TakeoverFrom, ALineThatNeverEndsIsRefusedAt64KB) {
  say(std::string(70 * 1024, 'x'));
  auto from = successor_->readFrom(std::chrono::seconds(5));
  ASSERT_FALSE(from);
  EXPECT_NE(from.error().message.find("a line over 65536 bytes"), std::string::npos)
      << from.error().message;
}

}  // namespace
}  // namespace ductus::supervisor
