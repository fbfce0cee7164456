#include "supervisor/handover.h"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/version.h"
#include "supervisor/engine.h"
#include "supervisor/systemd.h"

extern char** environ;

namespace ductus::supervisor {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The longest line either side of the socket pair takes (From carries the
// old engine's id and pid; none is near this).
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

namespace {

// The first inherited socket, as with LISTEN_FDS.
constexpr int kFirstFd = 3;

// A line of the protocol, or a discarded value.
json parseLine(const std::string& line) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string())
    return json(json::value_t::discarded);
  return j;
}

std::string lineOf(const json& j) { return j.dump() + "\n"; }

// Writes a whole line on a socket that may be non-blocking: a few hundred
// bytes on an idle socketpair never fill its buffer, but an EAGAIN is
// waited out rather than dropped.
bool writeLine(int fd, const std::string& line) {
  for (size_t off = 0; off < line.size();) {
    ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 1000);
      continue;
    }
    if (n < 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::vector<std::string> splitNames(const char* text) {
  std::vector<std::string> out;
  if (!text || !*text) return out;
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

std::vector<std::string> startCommandLine() {
  std::vector<std::string> args;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  if (args.empty()) return args;
  std::string& argv0 = args[0];
  std::error_code ec;
  if (argv0.find('/') != std::string::npos) {
    argv0 = fs::absolute(argv0, ec).lexically_normal().string();
  } else if (const char* path = std::getenv("PATH")) {
    for (auto& dir : splitNames(path)) {
      fs::path candidate = fs::path(dir.empty() ? "." : dir) / argv0;
      if (access(candidate.c_str(), X_OK) == 0) {
        argv0 = fs::absolute(candidate, ec).lexically_normal().string();
        break;
      }
    }
  }
  return args;
}

// ---------------------------------------------------------------- old side

Predecessor::Predecessor(Deps deps, HandoverTiming timing)
    : deps_(std::move(deps)), timing_(timing) {}

Predecessor::~Predecessor() { *alive_ = false; }

void Predecessor::start(std::function<void(Result<int64_t>)> answer, std::function<void(int)> exit) {
  answer_ = std::move(answer);
  exit_ = std::move(exit);
  if (deps_.command.empty()) return abandon("the command line this engine started with is unknown");
  auto sockets = deps_.engine->listeningSockets();
  std::string names;
  for (auto& [name, fd] : sockets) names += (names.empty() ? "" : ":") + name;

  pipe_ = UvHandle<uv_pipe_t>::make();
  uv_pipe_init(deps_.loop, pipe_.get(), 0);
  pipe_.markInitialized();
  pipe_->data = this;

  std::vector<uv_stdio_container_t> stdio(3 + sockets.size() + 1);
  for (int i = 0; i < 3; ++i) {
    stdio[i].flags = UV_INHERIT_FD;
    stdio[i].data.fd = i;
  }
  for (size_t i = 0; i < sockets.size(); ++i) {
    stdio[3 + i].flags = UV_INHERIT_FD;
    stdio[3 + i].data.fd = sockets[i].second;
  }
  int pairFd = static_cast<int>(3 + sockets.size());
  stdio[pairFd].flags =
      static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE);
  stdio[pairFd].data.stream = reinterpret_cast<uv_stream_t*>(pipe_.get());

  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view v = *e;
    if (v.starts_with(std::string(kTakeoverVar) + "=") ||
        v.starts_with(std::string(kListenFdsVar) + "=") ||
        v.starts_with(std::string(kListenFdNamesVar) + "="))
      continue;
    env.emplace_back(v);
  }
  env.push_back(std::string(kListenFdsVar) + "=" + std::to_string(sockets.size()));
  env.push_back(std::string(kListenFdNamesVar) + "=" + names);
  env.push_back(std::string(kTakeoverVar) + "=" + std::to_string(pairFd));
  std::vector<char*> envp;
  for (auto& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (auto& a : deps_.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  uv_process_options_t po{};
  po.file = argv[0];
  po.args = argv.data();
  po.env = envp.data();
  po.stdio = stdio.data();
  po.stdio_count = static_cast<int>(stdio.size());
  po.exit_cb = [](uv_process_t* p, int64_t status, int signal) {
    if (auto* self = static_cast<Predecessor*>(p->data)) self->onChildExit(status, signal);
  };
  process_ = UvHandle<uv_process_t>::make();
  int rc = uv_spawn(deps_.loop, process_.get(), &po);
  process_.markInitialized();  // initialized even when it fails: it must be closed
  process_->data = this;
  if (rc != 0) {
    childExited_ = true;
    return abandon("starting " + deps_.command[0] + ": " + uv_strerror(rc));
  }
  child_ = process_->pid;
  phase_ = Phase::Preparing;
  spdlog::info("handover: started the new engine (pid {}, {}) with {} socket(s): {}", child_,
               deps_.command[0], sockets.size(), names.empty() ? "none" : names);
  send(lineOf({{"type", "From"},
               {"pid", static_cast<int64_t>(getpid())},
               {"engine", deps_.engine->engineId()},
               {"version", kVersion}}));
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(pipe_.get()),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) {
        auto* self = static_cast<Predecessor*>(h->data);
        *buf = uv_buf_init(self->readBuffer_.data(), static_cast<unsigned>(self->readBuffer_.size()));
      },
      [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
        auto* self = static_cast<Predecessor*>(s->data);
        if (!self) return;
        if (n < 0) {
          uv_read_stop(s);
          return self->onEof();
        }
        self->partial_.append(buf->base, static_cast<size_t>(n));
        // The protocol's lines are a few hundred bytes: a longer one is not
        // the new engine speaking it, and must not grow without end.
        if (self->partial_.size() > kMaxLine && self->partial_.find('\n') == std::string::npos) {
          uv_read_stop(s);
          return self->abandon("the new engine sent a line over " + std::to_string(kMaxLine) +
                               " bytes");
        }
        auto alive = self->alive_;
        for (size_t nl; *alive && (nl = self->partial_.find('\n')) != std::string::npos;) {
          std::string line = self->partial_.substr(0, nl);
          self->partial_.erase(0, nl + 1);
          self->onLine(line);
        }
      });
  timer_ = makeTimer(deps_.loop, this);
  uv_timer_start(timer_.get(), &Predecessor::onTimer, static_cast<uint64_t>(timing_.ready.count()),
                 0);
}

void Predecessor::onTimer(uv_timer_t* t) {
  auto* self = static_cast<Predecessor*>(t->data);
  if (!self) return;
  if (self->phase_ == Phase::Preparing)
    return self->abandon("the new engine was not ready within " +
                         std::to_string(self->timing_.ready.count() / 1000) + " s");
  if (self->phase_ == Phase::Released && !self->outcome_) {
    spdlog::error("handover: the new engine did not say it runs within {} s",
                  self->timing_.running.count() / 1000);
    self->outcome_ = Error{"the new engine took over but did not say it runs within " +
                           std::to_string(self->timing_.running.count() / 1000) + " s"};
    self->maybeFinish();
  }
}

void Predecessor::send(const std::string& line) {
  uv_os_fd_t fd = -1;
  if (!pipe_ || uv_fileno(reinterpret_cast<uv_handle_t*>(pipe_.get()), &fd) != 0) return;
  writeLine(fd, line);
}

void Predecessor::onLine(const std::string& line) {
  json j = parseLine(line);
  if (j.is_discarded()) return spdlog::warn("handover: the new engine said something else: {}", line);
  std::string type = j["type"].get<std::string>();
  if (type == "Failed") {
    std::string reason = j.value("reason", std::string("no reason given"));
    if (phase_ == Phase::Preparing) return abandon(reason);
    if (phase_ == Phase::Released && !outcome_) {
      spdlog::error("handover: the new engine failed after it took over: {}", reason);
      outcome_ = Error{"the new engine failed after it took over: " + reason};
      maybeFinish();
    }
    return;
  }
  if (type == "Ready" && phase_ == Phase::Preparing) {
    phase_ = Phase::Stopping;
    uv_timer_stop(timer_.get());
    spdlog::info("handover: the new engine (pid {}) is ready; this engine stops its listeners, "
                 "then its delivery, and hands over",
                 child_);
    auto alive = alive_;
    deps_.engine->handOver(
        [this, alive] {
          if (!*alive) return;
          phase_ = Phase::Released;
          if (childExited_) {
            // Past the point of no return, and nobody to hand over to: the
            // unit's Restart= starts an engine again on the stored sockets.
            spdlog::error("handover: the new engine exited while this one stopped; exiting 1");
            outcome_ = Error{"the new engine exited while the old one stopped"};
            return;
          }
          if (deps_.systemd) deps_.systemd->tell("MAINPID=" + std::to_string(child_));
          send(lineOf({{"type", "Released"}}));
          spdlog::info("handover: claims released; the new engine (pid {}) takes charge", child_);
          uv_timer_start(timer_.get(), &Predecessor::onTimer,
                         static_cast<uint64_t>(timing_.running.count()), 0);
        },
        [this, alive] {
          if (!*alive) return;
          engineStopped_ = true;
          maybeFinish();
        });
    return;
  }
  if (type == "Running" && phase_ == Phase::Released && !outcome_) {
    outcome_ = Result<int64_t>(static_cast<int64_t>(child_));
    spdlog::info("handover: the new engine (pid {}) runs", child_);
    return maybeFinish();
  }
  spdlog::warn("handover: unexpected {} from the new engine", type);
}

void Predecessor::onEof() {
  if (phase_ == Phase::Preparing) return abandon("the new engine closed the handover socket");
  if (phase_ == Phase::Released && !outcome_) {
    outcome_ = Error{"the new engine went away after it took over"};
    maybeFinish();
  }
  // While stopping: childExited_ (the exit callback) decides.
}

void Predecessor::onChildExit(int64_t status, int signal) {
  childExited_ = true;
  std::string how = signal ? "was killed by signal " + std::to_string(signal)
                           : "exited with status " + std::to_string(status);
  if (phase_ == Phase::Preparing) return abandon("the new engine " + how);
  if (phase_ == Phase::Done && !killTimer_) return;
  killTimer_.reset();
  if (phase_ == Phase::Released && !outcome_) {
    outcome_ = Error{"the new engine " + how + " after it took over"};
    maybeFinish();
  }
}

void Predecessor::abandon(const std::string& why) {
  spdlog::error("handover: {}; this engine goes on", why);
  phase_ = Phase::Done;
  timer_.reset();
  if (pipe_) {
    send(lineOf({{"type", "Failed"}, {"reason", why}}));
    pipe_.reset();  // the new engine hears EOF, if it didn't say Failed itself
  }
  // Whatever it prepared stops cleanly on SIGTERM (what it stored is in
  // the queues this engine reads); after 10 s it is killed.
  if (!childExited_ && child_ > 0) {
    uv_process_kill(process_.get(), SIGTERM);
    killTimer_ = makeTimer(deps_.loop, this);
    uv_timer_start(
        killTimer_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<Predecessor*>(t->data);
          if (self && !self->childExited_) uv_process_kill(self->process_.get(), SIGKILL);
        },
        10'000, 0);
  }
  if (auto a = std::exchange(answer_, nullptr)) a(Error{why});
}

void Predecessor::maybeFinish() {
  if (!engineStopped_ || !outcome_ || phase_ == Phase::Done) return;
  phase_ = Phase::Done;
  timer_.reset();
  bool ok = outcome_->ok();
  if (auto a = std::exchange(answer_, nullptr)) a(*outcome_);
  if (auto e = std::exchange(exit_, nullptr)) e(ok ? 0 : 1);
}

// ---------------------------------------------------------------- new side

Result<std::unique_ptr<Successor>> Successor::fromEnvironment(Systemd& systemd) {
  const char* pair = std::getenv(kTakeoverVar);
  if (!pair || !*pair) return std::unique_ptr<Successor>();
  char* end = nullptr;
  long pairFd = std::strtol(pair, &end, 10);
  const char* count = std::getenv(kListenFdsVar);
  long n = count ? std::strtol(count, nullptr, 10) : 0;
  auto names = splitNames(std::getenv(kListenFdNamesVar));
  unsetenv(kTakeoverVar);
  unsetenv(kListenFdsVar);
  unsetenv(kListenFdNamesVar);
  if (*end || pairFd < kFirstFd || fcntl(static_cast<int>(pairFd), F_GETFD) < 0)
    return Error{std::string(kTakeoverVar) + "=" + pair + " is not an open descriptor"};
  if (n < 0 || static_cast<size_t>(n) != names.size() || kFirstFd + n > pairFd)
    return Error{std::string(kListenFdsVar) + " and " + kListenFdNamesVar + " don't agree"};
  auto self = std::unique_ptr<Successor>(new Successor(Fd(static_cast<int>(pairFd))));
  fcntl(self->pair_.get(), F_SETFD, FD_CLOEXEC);
  for (long i = 0; i < n; ++i) {
    int fd = kFirstFd + static_cast<int>(i);
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) continue;
    fcntl(fd, F_SETFD, flags | FD_CLOEXEC);  // workers must not inherit them
    const std::string& name = names[static_cast<size_t>(i)];
    if (name.starts_with("mllp-") || name.starts_with("http-"))
      systemd.inherit(name, Fd(fd));
    else
      self->sockets_.emplace_back(name, Fd(fd));
  }
  std::string list;
  for (auto& x : names) list += (list.empty() ? "" : ", ") + x;
  spdlog::info("handover: taking over with {} socket(s): {}", n, list.empty() ? "none" : list);
  return self;
}

Successor::~Successor() = default;

Result<std::string> Successor::readFrom(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = partial_.find('\n'); nl != std::string::npos) {
      std::string line = partial_.substr(0, nl);
      partial_.erase(0, nl + 1);
      json j = parseLine(line);
      if (j.is_discarded() || j["type"] != "From")
        return Error{"the old engine's first word was not From: " + line};
      predecessorPid_ = j.value("pid", int64_t{0});
      return j.value("engine", std::string());
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Error{"the old engine said nothing within the time"};
    pollfd p{pair_.get(), POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buf[4096];
    ssize_t got = ::recv(pair_.get(), buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return Error{"the old engine went away before it said who it is"};
    partial_.append(buf, static_cast<size_t>(got));
    if (partial_.size() > kMaxLine && partial_.find('\n') == std::string::npos)
      return Error{"the old engine sent a line over " + std::to_string(kMaxLine) + " bytes"};
  }
}

int Successor::takeSocket(const std::string& name) {
  for (auto it = sockets_.begin(); it != sockets_.end(); ++it)
    if (it->first == name) {
      int fd = it->second.release();
      sockets_.erase(it);
      return fd;
    }
  return -1;
}

void Successor::send(const std::string& line) {
  if (pair_.valid()) writeLine(pair_.get(), line);
}

void Successor::ready() { send(lineOf({{"type", "Ready"}, {"pid", static_cast<int64_t>(getpid())}})); }

void Successor::running() {
  done_ = true;
  send(lineOf({{"type", "Running"}, {"pid", static_cast<int64_t>(getpid())}}));
}

void Successor::failed(const std::string& reason) {
  done_ = true;
  send(lineOf({{"type", "Failed"}, {"reason", reason}}));
}

void Successor::watch(uv_loop_t* loop, std::function<void()> released, std::function<void()> lost) {
  released_ = std::move(released);
  lost_ = std::move(lost);
  // Inherited sockets the engine did not want (the API moved, say).
  sockets_.clear();
  poll_ = UvHandle<uv_poll_t>::make();
  if (uv_poll_init(loop, poll_.get(), pair_.get()) != 0) {
    poll_ = {};
    if (auto l = std::exchange(lost_, nullptr)) l();
    return;
  }
  poll_.markInitialized();
  poll_->data = this;
  uv_poll_start(poll_.get(), UV_READABLE | UV_DISCONNECT, [](uv_poll_t* h, int status, int) {
    auto* self = static_cast<Successor*>(h->data);
    if (!self) return;
    bool gone = status < 0;
    if (!gone) {
      char buf[4096];
      ssize_t got = ::recv(self->pair_.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (got <= 0) gone = true;
      else self->partial_.append(buf, static_cast<size_t>(got));
      if (self->partial_.size() > kMaxLine && self->partial_.find('\n') == std::string::npos) {
        self->partial_.clear();  // not the protocol: as if the old engine went away
        gone = true;
      }
    }
    for (size_t nl; self->released_ && (nl = self->partial_.find('\n')) != std::string::npos;) {
      std::string line = self->partial_.substr(0, nl);
      self->partial_.erase(0, nl + 1);
      json j = parseLine(line);
      if (!j.is_discarded() && j["type"] == "Released") {
        uv_poll_stop(h);
        self->lost_ = nullptr;
        if (auto r = std::exchange(self->released_, nullptr)) r();
        return;
      }
      if (!j.is_discarded() && j["type"] == "Failed") {
        spdlog::error("handover: the old engine gave up: {}", j.value("reason", std::string()));
        gone = true;
      }
    }
    if (gone) {
      uv_poll_stop(h);
      if (auto l = std::exchange(self->lost_, nullptr)) l();
    }
  });
}

}  // namespace ductus::supervisor
