#include "schema/pg_connection.h"

#include <charconv>
#include <string_view>

#include "common/log.h"
#include "schema/conninfo.h"
#include "schema/pg_error.h"

namespace ductus::store {
namespace {

std::string trimmed(const char* s) {
  std::string_view v = s ? s : "";
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.remove_suffix(1);
  return std::string(v);
}

// The connect_timeout libpq settled on (the string's, PGCONNECT_TIMEOUT's or
// a service file's), read as libpq's blocking connect reads it: 0 or less is
// no limit, 1 is raised to 2 (libpq: a 1 s timeout fails connects that were
// about to succeed).
int connectTimeoutOf(PGconn* c) {
  PQconninfoOption* opts = PQconninfo(c);
  if (!opts) return 0;
  int seconds = 0;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (std::string_view(o->keyword) != "connect_timeout" || !o->val) continue;
    std::string_view v = o->val;
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    std::from_chars(v.data(), v.data() + v.size(), seconds);
  }
  PQconninfoFree(opts);
  if (seconds <= 0) return 0;
  return seconds < 2 ? 2 : seconds;
}

}  // namespace

PgConnection::~PgConnection() {
  *alive_ = false;
  connectTimer_.reset();
  // Stop polling before libpq closes the socket.
  poll_.reset();
  conn_.reset();
}

void PgConnection::watch(int events) {
  int fd = PQsocket(conn_.get());
  // libpq may switch sockets while connecting (one address failed, the
  // next is tried): re-read it every time and re-create the poll handle.
  if (fd != pollFd_ || !poll_) {
    poll_.reset();
    pollFd_ = fd;
    if (fd < 0) return fail("connection has no socket");
    poll_ = UvHandle<uv_poll_t>::make();
    if (int rc = uv_poll_init(loop_, poll_.get(), fd); rc != 0) {
      poll_ = {};
      return fail(std::string("uv_poll_init: ") + uv_strerror(rc));
    }
    poll_.markInitialized();
    pollEvents_ = 0;
    if (state_ == State::Connecting) armConnectTimer();
  }
  poll_->data = this;
  // uv_poll_start first stops the poll, which takes the socket out of epoll
  // and puts it back in: two system calls, twice a statement, for nothing
  // when the events are the ones already watched.
  if (events == pollEvents_) return;
  pollEvents_ = events;
  uv_poll_start(poll_.get(), events, &PgConnection::onPoll);
}

void PgConnection::onPoll(uv_poll_t* h, int status, int events) {
  auto* self = static_cast<PgConnection*>(h->data);
  if (!self) return;
  if (status < 0) {
    // An error on the socket: let libpq find out what it is. libuv has
    // stopped the poll: the next watch() must start it again.
    self->pollEvents_ = 0;
    events = UV_READABLE | UV_WRITABLE;
  }
  if (self->state_ == State::Connecting)
    self->stepConnect();
  else if (self->state_ == State::Busy)
    self->stepQuery(events);
  else if (self->state_ == State::Idle && (events & UV_READABLE)) {
    // Idle and readable: the server closed the connection or sent a notice.
    if (!PQconsumeInput(self->conn_.get())) self->fail(trimmed(PQerrorMessage(self->conn_.get())));
  }
}

void PgConnection::connect(const std::string& conninfo, ConnectCallback cb) {
  onConnect_ = std::move(cb);
  auto hardened = hardenedConninfo(conninfo);
  if (!hardened) return fail(hardened.error().message);
  startConnecting(*hardened);
}

void PgConnection::startConnecting(const std::string& conninfo) {
  conninfo_ = conninfo;
  poll_.reset();  // a new attempt has a socket of its own
  pollFd_ = -1;
  conn_.reset(PQconnectStart(conninfo.c_str()));
  if (!conn_) return fail("out of memory starting a connection");
  if (PQstatus(conn_.get()) == CONNECTION_BAD) return fail(trimmed(PQerrorMessage(conn_.get())));
  // The server's NOTICEs ("relation ... already exists, skipping") went to
  // stderr as they came, in the middle of the engine's log: they are
  // debug lines of that log now.
  PQsetNoticeProcessor(
      conn_.get(),
      [](void*, const char* message) {
        spdlog::debug("postgres: {}", trimmed(message ? message : ""));
      },
      nullptr);
  connectTimeoutSeconds_ = connectTimeoutOf(conn_.get());
  state_ = State::Connecting;
  // PQconnectStart's first poll state is "writing".
  watch(UV_WRITABLE);
}

void PgConnection::stepConnect() {
  switch (PQconnectPoll(conn_.get())) {
    case PGRES_POLLING_READING:
      return watch(UV_READABLE);
    case PGRES_POLLING_WRITING:
      return watch(UV_WRITABLE);
    case PGRES_POLLING_OK: {
      connectTimer_.reset();
      if (PQsetnonblocking(conn_.get(), 1) != 0) return fail("PQsetnonblocking failed");
      state_ = State::Idle;
      watch(UV_READABLE);
      auto alive = alive_;
      if (auto cb = std::move(onConnect_)) cb({});
      if (*alive) startNext();
      return;
    }
    case PGRES_POLLING_FAILED:
    default:
      return fail(trimmed(PQerrorMessage(conn_.get())));
  }
}

void PgConnection::armConnectTimer() {
  if (connectTimeoutSeconds_ <= 0) return;
  if (!connectTimer_) connectTimer_ = makeTimer(loop_, this);
  uv_timer_start(connectTimer_.get(), &PgConnection::onConnectTimeout,
                 static_cast<uint64_t>(connectTimeoutSeconds_) * 1000, 0);
}

void PgConnection::onConnectTimeout(uv_timer_t* t) {
  auto* self = static_cast<PgConnection*>(t->data);
  if (!self || self->state_ != State::Connecting) return;
  std::string where;
  if (const char* host = PQhost(self->conn_.get()); host && *host) {
    where = std::string(" to ") + host;
    if (const char* port = PQport(self->conn_.get()); port && *port)
      where += std::string(":") + port;
  }
  std::string why = "no connection" + where + " within " +
                    std::to_string(self->connectTimeoutSeconds_) + " s (connect_timeout)";
  // A host that takes the TCP connection and never answers (a frozen
  // server, dropped packets) must not stop a multi-host URL from reaching
  // the next one: the attempt starts again on the hosts after it.
  const char* host = PQhost(self->conn_.get());
  const char* port = PQport(self->conn_.get());
  if (auto rest = conninfoAfterHost(self->conninfo_, host ? host : "", port ? port : "")) {
    spdlog::warn("postgres: {}; trying the next host", why);
    return self->startConnecting(*rest);
  }
  self->fail(why);
}

void PgConnection::query(std::string sql, std::vector<Param> params, QueryCallback cb) {
  Pending p;
  p.sql = std::move(sql);
  p.params = std::move(params);
  p.cb = std::move(cb);
  enqueue(std::move(p));
}

void PgConnection::query(std::string sql, std::vector<Param> params, std::vector<int> formats,
                         QueryCallback cb) {
  Pending p;
  p.sql = std::move(sql);
  p.params = std::move(params);
  p.cb = std::move(cb);
  p.formats = std::move(formats);
  enqueue(std::move(p));
}

void PgConnection::execute(const std::string& name, const std::string& sql,
                           std::vector<Param> params, std::vector<int> formats, QueryCallback cb,
                           bool binaryResults) {
  if (!prepared_.count(name)) {
    // Marked at once so a second execute queued behind this one does not
    // prepare again; a failed prepare unmarks it, and the executes queued
    // behind it fail with its error (a statement_timeout while waiting for
    // a lock, say), not the server's "does not exist".
    prepared_.insert(name);
    Pending prep;
    prep.sql = sql;
    prep.kind = Kind::Prepare;
    prep.name = name;
    prep.params.resize(params.size());
    auto alive = alive_;
    prep.cb = [this, alive, name](Result<PgResult> r) {
      if (*alive && !r.ok()) {
        prepared_.erase(name);
        failedPrepares_.insert_or_assign(name, r.error());
      }
    };
    enqueue(std::move(prep));
  }
  Pending p;
  p.params = std::move(params);
  p.cb = std::move(cb);
  p.kind = Kind::Prepared;
  p.binaryResults = binaryResults;
  p.name = name;
  p.formats = std::move(formats);
  enqueue(std::move(p));
}

void PgConnection::script(std::string sql, QueryCallback cb) {
  Pending p;
  p.sql = std::move(sql);
  p.cb = std::move(cb);
  p.kind = Kind::Script;
  enqueue(std::move(p));
}

void PgConnection::enqueue(Pending p) {
  queue_.push_back(std::move(p));
  if (state_ == State::Idle) startNext();
  if (state_ == State::Broken) {
    // A broken connection answers at once; callers reconnect.
    fail("connection is broken");
  }
}

void PgConnection::startNext() {
  if (state_ != State::Idle || queue_.empty()) return;
  current_ = std::move(queue_.front());
  queue_.pop_front();
  last_ = PgResult();
  error_.reset();

  const Pending& q = *current_;
  if (q.kind == Kind::Prepare) failedPrepares_.erase(q.name);
  if (q.kind == Kind::Prepared) {
    if (auto f = failedPrepares_.find(q.name); f != failedPrepares_.end())
      return finishQuery(f->second);
  }
  std::vector<const char*> values;
  std::vector<int> lengths;
  values.reserve(q.params.size());
  lengths.reserve(q.params.size());
  for (auto& p : q.params) {
    values.push_back(p ? p->data() : nullptr);
    lengths.push_back(p ? static_cast<int>(p->size()) : 0);
  }
  const int* formats = q.formats.empty() ? nullptr : q.formats.data();
  if (!q.formats.empty() && q.formats.size() != q.params.size())
    return finishQuery(Error{"postgres: parameter formats do not match the parameters"});
  int n = static_cast<int>(values.size());
  int sent = 0;
  switch (q.kind) {
    case Kind::Params:
      sent = PQsendQueryParams(conn_.get(), q.sql.c_str(), n, nullptr, values.data(),
                               lengths.data(), formats, 0);
      break;
    case Kind::Prepare:
      sent = PQsendPrepare(conn_.get(), q.name.c_str(), q.sql.c_str(), n, nullptr);
      break;
    case Kind::Prepared:
      sent = PQsendQueryPrepared(conn_.get(), q.name.c_str(), n, values.data(), lengths.data(),
                                 formats, q.binaryResults ? 1 : 0);
      break;
    case Kind::Script:
      sent = PQsendQuery(conn_.get(), q.sql.c_str());
      break;
  }
  if (!sent) return fail(trimmed(PQerrorMessage(conn_.get())));
  state_ = State::Busy;
  stepQuery(UV_WRITABLE);
}

void PgConnection::stepQuery(int events) {
  PGconn* c = conn_.get();
  int flushed = PQflush(c);
  if (flushed < 0) return fail(trimmed(PQerrorMessage(c)));
  if (events & UV_READABLE) {
    if (!PQconsumeInput(c)) return fail(trimmed(PQerrorMessage(c)));
  }
  while (!PQisBusy(c)) {
    PGresult* r = PQgetResult(c);
    if (!r) {
      // The statement is complete.
      if (error_) return finishQuery(*error_);
      return finishQuery(std::move(last_));
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR) {
      if (!error_) {
        const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        error_ = Error{trimmed(PQresultErrorMessage(r)), ErrorKind::Database, code ? code : ""};
      }
      PQclear(r);
    } else {
      last_ = PgResult(r);
    }
  }
  if (PQstatus(c) == CONNECTION_BAD) return fail(trimmed(PQerrorMessage(c)));
  // Still waiting: more to write (1) wants writable too.
  watch(flushed == 1 ? (UV_READABLE | UV_WRITABLE) : UV_READABLE);
}

void PgConnection::finishQuery(Result<PgResult> r) {
  auto cb = std::move(current_->cb);
  current_.reset();
  state_ = State::Idle;
  watch(UV_READABLE);
  auto alive = alive_;
  if (cb) cb(std::move(r));
  if (*alive) startNext();
}

std::vector<PgConnection::QueryCallback> PgConnection::abandon() {
  state_ = State::Broken;
  connectTimer_.reset();
  poll_.reset();
  pollFd_ = -1;
  onConnect_ = nullptr;
  std::vector<QueryCallback> out;
  if (current_ && current_->cb) out.push_back(std::move(current_->cb));
  current_.reset();
  for (auto& p : queue_)
    if (p.cb) out.push_back(std::move(p.cb));
  queue_.clear();
  return out;
}

void PgConnection::fail(const std::string& why) {
  // Every waiter hears the cause; the connection is not reused.
  state_ = State::Broken;
  connectTimer_.reset();
  poll_.reset();
  pollFd_ = -1;
  Error err =
      pg::connectionFailure("postgres: " + (why.empty() ? std::string("connection lost") : why));
  auto alive = alive_;
  if (auto cb = std::move(onConnect_)) {
    cb(err);
    if (!*alive) return;
  }
  std::deque<Pending> waiting;
  if (current_) waiting.push_back(std::move(*current_));
  current_.reset();
  for (auto& p : queue_) waiting.push_back(std::move(p));
  queue_.clear();
  for (auto& p : waiting) {
    if (p.cb) p.cb(err);
    if (!*alive) return;
  }
}

}  // namespace ductus::store
