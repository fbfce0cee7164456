// PgConnection: one PostgreSQL connection driven asynchronously on a libuv
// loop. libpq runs non-blocking (PQconnectStart/PQconnectPoll, then
// PQsendQueryParams/PQflush/PQconsumeInput/PQisBusy/PQgetResult), and a
// uv_poll on PQsocket() is re-armed for each state, as PgBouncer's
// test/asynctest.c does. Nothing here ever blocks the loop.
//
// Queries queue up and run one after another in submission order. Every
// parameter is bound (text format unless a format vector says binary, which
// bytea payloads and arrays use: no hex doubling of a 64 MB message); SQL is
// never assembled from values. Named statements are prepared once per
// connection and then executed by name.
//
// Every connection gets connect_timeout and TCP keepalives unless its
// string sets them (schema/conninfo.h). libpq ignores connect_timeout in
// non-blocking mode (PQconnectPoll leaves the clock to the caller), so this
// class enforces it with a timer: a server that accepts the TCP connection
// and then says nothing fails the connect instead of hanging it.
#pragma once

#include <libpq-fe.h>
#include <uv.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "common/uv_handle.h"
#include "schema/pg_result.h"

namespace ductus::store {

using Param = std::optional<std::string>;  // nullopt = SQL NULL

class PgConnection {
 public:
  using ConnectCallback = std::function<void(Status)>;
  using QueryCallback = std::function<void(Result<PgResult>)>;

  explicit PgConnection(uv_loop_t* loop) : loop_(loop) {}
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Starts connecting; cb runs on the loop once connected or failed (a
  // connection string that does not parse, or no connection within its
  // connect_timeout, fail too).
  void connect(const std::string& conninfo, ConnectCallback cb);

  // Queues a statement. cb runs on the loop with the (last) result, or an
  // Error carrying the server's message and SQLSTATE (kind Database, Error::sqlstate).
  void query(std::string sql, std::vector<Param> params, QueryCallback cb);
  // The same with a format per parameter (0 text, 1 binary; empty = text).
  void query(std::string sql, std::vector<Param> params, std::vector<int> formats,
             QueryCallback cb);
  // Prepares `sql` under `name` the first time this connection sees the
  // name, then executes it. The name must always mean the same text.
  // `binaryResults`: every column comes back in its binary send format
  // (bytea as its bytes, not hex text at twice the size).
  void execute(const std::string& name, const std::string& sql, std::vector<Param> params,
               std::vector<int> formats, QueryCallback cb, bool binaryResults = false);
  // Simple protocol: several statements separated by ';', no parameters.
  // Only for text that ships inside the binary (migrations, BEGIN/COMMIT).
  void script(std::string sql, QueryCallback cb);

  // Stops this connection for good without answering anyone: its queued
  // callbacks are handed back for the caller to drop. A pool going away uses
  // it, because those callbacks hold the leases that keep the pool alive, and
  // answering them would run callers that are being torn down.
  std::vector<QueryCallback> abandon();

  bool connected() const { return state_ == State::Idle || state_ == State::Busy; }
  bool broken() const { return state_ == State::Broken; }
  size_t queued() const { return queue_.size() + (state_ == State::Busy ? 1 : 0); }

 private:
  enum class State { Fresh, Connecting, Idle, Busy, Broken };
  enum class Kind { Params, Prepare, Prepared, Script };
  struct Pending {
    std::string sql;
    std::vector<Param> params;
    QueryCallback cb;
    Kind kind = Kind::Params;
    std::string name;          // Prepare / Prepared
    std::vector<int> formats;  // per parameter; empty = all text
    bool binaryResults = false;
  };
  void enqueue(Pending p);

  static void onPoll(uv_poll_t* h, int status, int events);
  void watch(int events);
  void stepConnect();
  void armConnectTimer();
  static void onConnectTimeout(uv_timer_t* t);
  // PQconnectStart on `conninfo` (hardened), then polled.
  void startConnecting(const std::string& conninfo);
  void startNext();
  void stepQuery(int events);
  void fail(const std::string& why);
  void finishQuery(Result<PgResult> r);

  uv_loop_t* loop_;
  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  std::unique_ptr<PGconn, Finish> conn_;
  UvHandle<uv_poll_t> poll_;
  int pollFd_ = -1;
  int pollEvents_ = 0;  // what poll_ watches now
  // While connecting: runs out after connect_timeout, restarted for each
  // address libpq tries (as its blocking connect does).
  UvHandle<uv_timer_t> connectTimer_;
  int connectTimeoutSeconds_ = 0;  // 0: none
  std::string conninfo_;           // the attempt's (hardened) connection string
  State state_ = State::Fresh;
  ConnectCallback onConnect_;
  std::deque<Pending> queue_;
  std::optional<Pending> current_;
  PgResult last_;
  std::optional<Error> error_;
  std::unordered_set<std::string> prepared_;
  // Why a statement's prepare failed, for the executes queued behind it;
  // forgotten when the name is prepared again.
  std::unordered_map<std::string, Error> failedPrepares_;
  // Guards against `this` being destroyed inside a user callback.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::store
