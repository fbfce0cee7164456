#include "supervisor/systemd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace ductus::supervisor {
namespace {

// sd_listen_fds(3): the first inherited descriptor.
constexpr int kListenFdsStart = 3;

// A decimal number that is the whole text, or -1.
long parseCount(const char* text) {
  if (!text || !*text) return -1;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno || *end || v < 0) return -1;
  return v;
}

std::vector<std::string> splitNames(const char* text) {
  std::vector<std::string> out;
  if (!text) return out;
  std::string_view s = text;
  for (;;) {
    size_t colon = s.find(':');
    out.emplace_back(s.substr(0, colon));
    if (colon == s.npos) break;
    s.remove_prefix(colon + 1);
  }
  return out;
}

}  // namespace

std::unique_ptr<Systemd> Systemd::fromEnvironment() {
  const char* notify = std::getenv("NOTIFY_SOCKET");
  std::multimap<std::string, Fd> inherited;
  // LISTEN_PID guards against variables a parent left for itself: they are
  // ours only when they name this process.
  long pid = parseCount(std::getenv("LISTEN_PID"));
  long count = parseCount(std::getenv("LISTEN_FDS"));
  if (pid == getpid() && count > 0) {
    auto names = splitNames(std::getenv("LISTEN_FDNAMES"));
    for (long i = 0; i < count; ++i) {
      int fd = kListenFdsStart + static_cast<int>(i);
      int flags = fcntl(fd, F_GETFD);
      if (flags < 0) continue;  // said but not there
      fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
      std::string name = static_cast<size_t>(i) < names.size() ? names[i] : "unknown";
      inherited.emplace(std::move(name), Fd(fd));
    }
  }
  // Workers and `ductus dev`'s PostgreSQL must not think they were given these.
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  if (!inherited.empty()) {
    std::string list;
    for (auto& [name, fd] : inherited) list += (list.empty() ? "" : ", ") + name;
    spdlog::info("systemd: {} listening socket(s) handed over: {}", inherited.size(), list);
  }
  return std::make_unique<Systemd>(notify ? notify : "", std::move(inherited));
}

Systemd::Systemd(std::string notifySocket, std::multimap<std::string, Fd> inherited)
    : notifySocket_(std::move(notifySocket)), inherited_(std::move(inherited)) {
  for (auto& [name, fd] : inherited_) names_.insert(name);
}

Systemd::~Systemd() = default;

Status Systemd::notify(std::string_view state, const std::vector<int>& fds) {
  if (notifySocket_.empty() || quiet_) return {};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string& path = notifySocket_;
  if ((path[0] != '/' && path[0] != '@') || path.size() >= sizeof addr.sun_path)
    return Error{"NOTIFY_SOCKET=" + path + " is neither an absolute path nor an abstract name"};
  std::memcpy(addr.sun_path, path.data(), path.size());
  // "@name": the abstract namespace, a leading NUL and no terminator.
  if (path[0] == '@') addr.sun_path[0] = '\0';
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                    (path[0] == '/' ? 1 : 0));
  Fd sock(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return Error{std::string("notify socket: ") + std::strerror(errno)};

  iovec iov{const_cast<char*>(state.data()), state.size()};
  msghdr msg{};
  msg.msg_name = &addr;
  msg.msg_namelen = len;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    size_t bytes = fds.size() * sizeof(int);
    control.assign(CMSG_SPACE(bytes), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(bytes);
    std::memcpy(CMSG_DATA(c), fds.data(), bytes);
  }
  if (sendmsg(sock.get(), &msg, MSG_NOSIGNAL) < 0)
    return Error{"notifying systemd at " + path + ": " + std::strerror(errno)};
  return {};
}

void Systemd::tell(std::string_view state, const std::vector<int>& fds) {
  auto s = notify(state, fds);
  if (s) return;
  std::string kind(state.substr(0, state.find('=')));
  if (warned_.insert(kind).second)
    spdlog::warn("systemd: {} (sending {}; said once)", s.error().message, kind);
}

std::string Systemd::socketName(std::string_view kind, std::string_view host, uint16_t port) {
  std::string name(kind);
  name += '-';
  for (char c : host) name += c == ':' ? '_' : c;
  name += '-';
  name += std::to_string(port);
  return name;
}

int Systemd::takeListener(const std::string& name) {
  auto it = inherited_.find(name);
  if (it == inherited_.end()) return -1;
  int fd = it->second.release();
  inherited_.erase(it);
  taken_.insert(name);
  return fd;
}

void Systemd::storeListener(const std::string& name, int fd) {
  if (!notifying() || fd < 0) return;
  names_.insert(name);
  listeners_[name] = fd;
  tell("FDSTORE=1\nFDNAME=" + name, {fd});
}

std::vector<std::string> Systemd::dropUntaken() {
  std::vector<std::string> names;
  for (auto& [name, fd] : inherited_) {
    names.push_back(name);
    // A second socket under a name one listener took: closing ours is
    // enough, removing the name would drop the one in use.
    if (taken_.count(name)) continue;
    if (quiet_) removals_.push_back(name);
    tell("FDSTOREREMOVE=1\nFDNAME=" + name);
    names_.erase(name);
  }
  inherited_.clear();
  return names;
}

void Systemd::unstoreListeners() {
  for (auto& [name, fd] : listeners_) {
    tell("FDSTOREREMOVE=1\nFDNAME=" + name);
    names_.erase(name);
  }
}

void Systemd::restoreListeners() {
  auto listeners = listeners_;
  for (auto& [name, fd] : listeners) storeListener(name, fd);
}

void Systemd::inherit(const std::string& name, Fd fd) {
  names_.insert(name);
  inherited_.emplace(name, std::move(fd));
}

void Systemd::speak() {
  if (!quiet_) return;
  quiet_ = false;
  for (auto& name : removals_) tell("FDSTOREREMOVE=1\nFDNAME=" + name);
  removals_.clear();
  auto listeners = listeners_;
  for (auto& [name, fd] : listeners) storeListener(name, fd);
}

void Systemd::removeStored() {
  inherited_.clear();
  for (auto& name : names_) tell("FDSTOREREMOVE=1\nFDNAME=" + name);
  names_.clear();
}

}  // namespace ductus::supervisor
