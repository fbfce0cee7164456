#include "supervisor/control_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <pwd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "api/auth/local_caller.h"
#include "api/engine_routes.h"
#include "api/engine_view.h"
#include "api/router.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/version.h"
#include "ctl/protocol.h"

namespace ductus::supervisor {
namespace fs = std::filesystem;
using nlohmann::json;
using ctl::kControlMaxConnections;
using ctl::kControlMaxLine;

struct ControlSocket::Connection {
  ControlSocket* owner = nullptr;
  UvHandle<uv_pipe_t> pipe;
  std::vector<char> readBuffer = std::vector<char>(16 * 1024);
  std::string partial;            // bytes after the last newline
  std::deque<std::string> lines;  // requests waiting for the one in hand
  bool busy = false;              // a request is being answered
  bool eof = false;               // the peer wrote its last request
  bool closing = false;           // answered its last; close after the write
  uid_t uid = 0;                  // the peer's (SO_PEERCRED), checked at accept
};

namespace {

std::string isoTime(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char out[32];
  std::strftime(out, sizeof out, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return out;
}

json error(const std::string& message, const std::string& code) {
  return {{"ok", false}, {"error", message}, {"code", code}};
}

Result<sockaddr_un> addressOf(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    return Error{"control socket path must be 1 to " + std::to_string(sizeof a.sun_path - 1) +
                 " bytes long: " + path};
  std::memcpy(a.sun_path, path.data(), path.size());
  return a;
}

}  // namespace

ControlSocket::ControlSocket(uv_loop_t* loop, api::EngineView& view) : loop_(loop), view_(view) {}

ControlSocket::~ControlSocket() {
  *alive_ = false;
  connections_.clear();
  server_.reset();
  struct stat st {};
  if (!path_.empty() && ino_ && !keepFile_ && lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ &&
      st.st_ino == ino_)
    unlink(path_.c_str());
}

Status ControlSocket::listen(const std::string& path) {
  auto address = addressOf(path);
  if (!address) return address.error();
  fs::path dir = fs::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !fs::exists(dir, ec)) {
    // Only the owner goes through a folder made for the socket.
    if (fs::create_directories(dir, ec); ec)
      return Error{"creating " + dir.string() + ": " + ec.message()};
    fs::permissions(dir, fs::perms::owner_all, ec);
  }
  // A folder someone else owns (/tmp/ductus-UID made first by another
  // user) would let them put their socket in the engine's place.
  if (struct stat d{};
      !dir.empty() && stat(dir.c_str(), &d) == 0 && d.st_uid != geteuid() && d.st_uid != 0)
    return Error{"the control socket's folder " + dir.string() + " belongs to uid " +
                 std::to_string(d.st_uid) + ", not this engine's"};
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Error{path + " exists and is not a socket"};
    // Left by an engine that died? Nobody accepts on a stale one. A
    // non-blocking connect: a full backlog (EAGAIN) means alive too.
    Fd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!probe.valid()) return Error{std::string("socket: ") + std::strerror(errno)};
    int r = connect(probe.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof *address);
    if (r == 0 || errno == EAGAIN)
      return Error{"another engine answers on the control socket " + path +
                   " (--control PATH to use another)"};
    if (errno != ECONNREFUSED)
      return Error{"checking the control socket " + path + ": " + std::strerror(errno)};
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      return Error{"removing the stale control socket " + path + ": " + std::strerror(errno)};
    spdlog::info("control socket: replaced a stale {} (its engine is gone)", path);
  }
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Error{std::string("socket: ") + std::strerror(errno)};
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&*address), sizeof *address) != 0)
    return Error{"binding " + path + ": " + std::strerror(errno)};
  // Before listen(): until then a connect is refused, whatever the mode
  // the umask gave the file.
  if (chmod(path.c_str(), 0600) != 0 || lstat(path.c_str(), &st) != 0) {
    int e = errno;
    unlink(path.c_str());
    return Error{"making " + path + " 0600: " + std::strerror(e)};
  }
  path_ = path;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  if (::listen(fd.get(), static_cast<int>(kControlMaxConnections)) != 0)
    return Error{"listening on " + path + ": " + std::strerror(errno)};
  return serve(fd.release(), path);
}

Status ControlSocket::adopt(const std::string& path, int fd) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    ::close(fd);
    return Error{"the control socket " + path + " handed over is gone"};
  }
  path_ = path;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return serve(fd, path);
}

int ControlSocket::fd() const {
  uv_os_fd_t fd = -1;
  if (!server_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(server_.get()), &fd) != 0)
    return -1;
  return fd;
}

Status ControlSocket::serve(int listening, const std::string& path) {
  Fd fd(listening);
  server_ = UvHandle<uv_pipe_t>::make();
  if (int r = uv_pipe_init(loop_, server_.get(), 0); r != 0)
    return Error{std::string("uv_pipe_init: ") + uv_strerror(r)};
  server_.markInitialized();
  server_->data = this;
  if (int r = uv_pipe_open(server_.get(), fd.get()); r != 0)
    return Error{std::string("uv_pipe_open: ") + uv_strerror(r)};
  fd.release();  // the handle closes it
  if (int r = uv_listen(reinterpret_cast<uv_stream_t*>(server_.get()),
                        static_cast<int>(kControlMaxConnections), &ControlSocket::onConnection);
      r != 0)
    return Error{"listening on " + path + ": " + uv_strerror(r)};
  return {};
}

void ControlSocket::onConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<ControlSocket*>(server->data);
  if (!self) return;
  if (status < 0) return spdlog::warn("control socket: accept: {}", uv_strerror(status));
  self->accept();
}

namespace {

void send(const std::shared_ptr<ControlSocket::Connection>& c, const json& answer,
          std::function<void()> written);

}  // namespace

void ControlSocket::accept() {
  auto c = std::make_shared<Connection>();
  c->owner = this;
  c->pipe = UvHandle<uv_pipe_t>::make();
  if (uv_pipe_init(loop_, c->pipe.get(), 0) != 0) return;
  c->pipe.markInitialized();
  c->pipe->data = c.get();
  if (uv_accept(reinterpret_cast<uv_stream_t*>(server_.get()),
                reinterpret_cast<uv_stream_t*>(c->pipe.get())) != 0)
    return;
  bool full = connections_.size() >= kControlMaxConnections;
  connections_[c.get()] = c;

  uv_os_fd_t fd = -1;
  uv_fileno(reinterpret_cast<uv_handle_t*>(c->pipe.get()), &fd);
  ucred peer{};
  socklen_t len = sizeof peer;
  bool known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0;
  uid_t mine = geteuid();
  if (!known || (peer.uid != mine && peer.uid != 0)) {
    if (known)
      spdlog::warn("control socket: refused uid {} (pid {}): the engine runs as uid {}", peer.uid,
                   peer.pid, mine);
    c->closing = true;
    return send(
        c, error("permission denied: the engine runs as uid " + std::to_string(mine), "forbidden"),
        [this, p = c.get()] { drop(p); });
  }
  c->uid = peer.uid;
  if (full) {
    c->closing = true;
    return send(c,
                error("too many control connections (" + std::to_string(kControlMaxConnections) +
                          "); try again",
                      "busy"),
                [this, p = c.get()] { drop(p); });
  }
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(c->pipe.get()),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) {
        auto* conn = static_cast<Connection*>(h->data);
        *buf = uv_buf_init(conn->readBuffer.data(), static_cast<unsigned>(conn->readBuffer.size()));
      },
      [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
        auto* conn = static_cast<Connection*>(s->data);
        if (!conn || conn->closing) return;
        ControlSocket* self = conn->owner;
        auto it = self->connections_.find(conn);
        if (it == self->connections_.end()) return;
        std::shared_ptr<Connection> c = it->second;
        if (n < 0) {
          uv_read_stop(s);
          if (n != UV_EOF) return self->drop(conn);
          c->eof = true;
          if (!c->busy && c->lines.empty()) self->drop(conn);
          return;
        }
        c->partial.append(buf->base, static_cast<size_t>(n));
        bool tooLong = false;
        for (size_t nl; (nl = c->partial.find('\n')) != std::string::npos;) {
          std::string line = c->partial.substr(0, nl);
          c->partial.erase(0, nl + 1);
          if (!line.empty() && line.back() == '\r') line.pop_back();
          tooLong = tooLong || line.size() > kControlMaxLine;
          c->lines.push_back(std::move(line));
        }
        if (tooLong || c->partial.size() > kControlMaxLine) {
          // Said once and closed: what follows can't be told from the rest.
          uv_read_stop(s);
          c->closing = true;
          c->lines.clear();
          return send(
              c,
              error("a request line is at most " + std::to_string(kControlMaxLine) + " bytes",
                    "too_long"),
              [self, conn] { self->drop(conn); });
        }
        if (!c->busy) self->resume(c);
      });
}

namespace {

void send(const std::shared_ptr<ControlSocket::Connection>& c, const json& answer,
          std::function<void()> written) {
  struct Write {
    uv_write_t req{};
    std::string data;
    std::shared_ptr<ControlSocket::Connection> c;  // its handle lives until the callback
    std::function<void()> written;
  };
  auto w = std::make_unique<Write>();
  w->data = answer.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  w->c = c;
  w->written = std::move(written);
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  w->req.data = w.get();
  int r = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(c->pipe.get()), &buf, 1,
                   [](uv_write_t* req, int) {
                     std::unique_ptr<Write> w(static_cast<Write*>(req->data));
                     if (w->written) w->written();
                   });
  if (r != 0) {
    auto done = std::move(w->written);
    if (done) done();
    return;
  }
  w.release();  // freed in the callback
}

}  // namespace

void ControlSocket::drop(Connection* c) { connections_.erase(c); }

// The next request waiting on `c`, once the one in hand is answered.
void ControlSocket::resume(const std::shared_ptr<Connection>& c) {
  c->busy = false;
  if (!connections_.count(c.get())) return;
  while (!c->busy && !c->lines.empty()) {
    std::string line = std::move(c->lines.front());
    c->lines.pop_front();
    if (!line.empty()) handleLine(c, line);
  }
  if (!c->busy && c->lines.empty() && c->eof) drop(c.get());
}

void ControlSocket::handleLine(const std::shared_ptr<Connection>& c, const std::string& line) {
  json request = json::parse(line, nullptr, false);
  auto next = [this, c] { resume(c); };
  c->busy = true;
  if (request.is_discarded() || !request.is_object() || !request.contains("request") ||
      !request["request"].is_string())
    return send(
        c, error("a request is one JSON object a line, as {\"request\":\"status\"}", "bad_request"),
        next);
  std::string what = request["request"].get<std::string>();
  if (what == "status") return answerStatus(c, true);
  if (what == "interfaces") return answerStatus(c, false);
  if (what == "api") return answerApi(c, request);
  if (what == "handover") return answerHandover(c);
  send(c,
       error("unknown request '" + what + "'; this engine answers: status, interfaces, api, handover",
             "unknown_request"),
       next);
}

namespace {

// The peer's account name, for the audit log's local:<user>; its uid when
// the system has no name for it.
std::string accountOf(uid_t uid) {
  std::vector<char> buf(16 * 1024);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found && pw.pw_name)
    return pw.pw_name;
  return "uid" + std::to_string(uid);
}

}  // namespace

void ControlSocket::answerApi(const std::shared_ptr<Connection>& c, const json& request) {
  std::weak_ptr<bool> alive = alive_;
  auto finish = [this, alive, c](json answer) {
    if (alive.expired() || !connections_.count(c.get())) return;
    send(c, answer, [this, alive, c] {
      if (!alive.expired()) resume(c);
    });
  };
  if (!api_) return finish(error("this engine runs no API operations", "unavailable"));
  auto method = request.value("method", json());
  auto path = request.value("path", json());
  static const std::vector<std::string> kMethods{"GET", "POST", "PUT", "PATCH", "DELETE"};
  if (!method.is_string() ||
      std::find(kMethods.begin(), kMethods.end(), method.get<std::string>()) == kMethods.end())
    return finish(error("an api request needs a method: GET, POST, PUT, PATCH or DELETE",
                        "bad_request"));
  if (!path.is_string() || path.get<std::string>().rfind("/api/v1/", 0) != 0)
    return finish(error("an api request needs a path under /api/v1/", "bad_request"));
  net::HttpRequest http;
  http.method = method.get<std::string>();
  std::string target = path.get<std::string>();
  if (auto q = target.find('?'); q != std::string::npos) {
    http.query = target.substr(q + 1);
    target.resize(q);
  }
  http.path = std::move(target);
  http.peer = "control socket (uid " + std::to_string(c->uid) + ")";
  http.headers.emplace_back(api::kLocalUserHeader, accountOf(c->uid));
  if (auto body = request.find("body"); body != request.end() && !body->is_null()) {
    http.body = body->is_string() ? body->get<std::string>() : body->dump();
    http.headers.emplace_back("content-type", "application/json");
  }
  api_->handle(http, net::HttpRespond::to([finish](net::HttpResponse r) {
    bool ok = r.status >= 200 && r.status < 300;
    json body = r.body.empty() ? json() : json::parse(r.body, nullptr, false);
    if (body.is_discarded()) body = r.body;
    json answer = {{"ok", ok}, {"status", r.status}, {"body", body}};
    if (!ok) {
      answer["error"] = body.is_object() && body.value("message", json()).is_string()
                            ? body["message"]
                            : json("the engine answered " + std::to_string(r.status));
      answer["code"] = body.is_object() && body.value("error", json()).is_string()
                           ? body["error"]
                           : json("http_" + std::to_string(r.status));
    }
    finish(std::move(answer));
  }));
}

void ControlSocket::answerHandover(const std::shared_ptr<Connection>& c) {
  std::weak_ptr<bool> alive = alive_;
  auto finish = [this, alive, c](json answer) {
    if (alive.expired() || !connections_.count(c.get())) return;
    send(c, answer, [this, alive, c] {
      if (!alive.expired()) resume(c);
    });
  };
  if (!handover_) return finish(error("this engine can't hand over (ductus run only)", "unavailable"));
  handover_(finish);
}

void ControlSocket::answerStatus(const std::shared_ptr<Connection>& c, bool withEngine) {
  std::weak_ptr<bool> alive = alive_;
  auto finish = [this, alive, c](json answer) {
    if (alive.expired() || !connections_.count(c.get())) return;
    send(c, answer, [this, alive, c] {
      if (!alive.expired()) resume(c);
    });
  };
  view_.interfacesWithPending(
      [this, alive, withEngine, finish](Result<std::vector<api::InterfaceInfo>> list) {
        if (alive.expired()) return;
        if (!list)
          return finish(error("reading the interfaces: " + list.error().message, "engine"));
        json out = {{"ok", true}};
        json interfaces = json::array();
        for (auto& f : *list) {
          json destinations = json::array();
          for (auto& d : f.destinations) {
            destinations.push_back({{"name", d.name},
                                    {"route", d.route},
                                    {"pending", d.pending ? json(*d.pending) : json(nullptr)},
                                    {"sent", d.sent},
                                    {"filtered", d.filtered},
                                    {"quarantined", d.quarantined},
                                    {"routed", d.routed},
                                    {"retries", d.retries}});
            // The monitor's judgement, as GET /interfaces shows it.
            if (d.health) destinations.back()["health"] = api::destinationHealthJson(*d.health, true);
          }
          json intake = nullptr;
          if (f.gateOpen) intake = *f.gateOpen ? "open" : "closed";
          interfaces.push_back({{"name", f.name},
                                {"source", f.source},
                                {"state", f.state},
                                {"intake", intake},
                                {"received", f.received},
                                {"duplicates", f.duplicates},
                                {"destinations", std::move(destinations)}});
          if (f.health) interfaces.back()["health"] = api::interfaceHealthJson(*f.health);
        }
        if (withEngine) {
          api::EngineInfo e = view_.engine();
          auto uptime = std::chrono::duration_cast<std::chrono::seconds>(
              std::chrono::system_clock::now() - e.startedAt);
          out["engine"] = {{"version", kVersion},
                           {"versionLine", kVersionLine},
                           {"pid", static_cast<int64_t>(getpid())},
                           {"uid", static_cast<int64_t>(geteuid())},
                           {"startedAt", isoTime(e.startedAt)},
                           {"uptimeSeconds", uptime.count()},
                           {"state", std::string(api::engineStateName(e.state))},
                           {"engineId", e.engineId},
                           {"ownership", e.ownership}};
          // The other live engines on the database and what each owns.
          json others = json::array();
          for (auto& o : e.otherEngines)
            others.push_back({{"id", o.id},
                              {"host", o.host},
                              {"pid", o.pid},
                              {"version", o.version},
                              {"startedAt", o.startedAt},
                              {"interfaces", o.interfaces}});
          out["otherEngines"] = std::move(others);
          json workers = json::array();
          for (auto& w : e.workers)
            workers.push_back({{"group", w.group},
                               {"slot", w.slot},
                               {"pid", static_cast<int64_t>(w.pid)},
                               {"state", w.state},
                               {"restarts", w.restarts},
                               {"callsInFlight", w.callsInFlight}});
          out["workers"] = std::move(workers);
        }
        out["interfaces"] = std::move(interfaces);
        finish(std::move(out));
      });
}

}  // namespace ductus::supervisor
