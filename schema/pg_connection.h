// PgConnection: one PostgreSQL connection driven asynchronously on a libuv
// loop. libpq runs non-blocking (PQconnectStart/PQconnectPoll, then
// PQsendQueryParams/PQflush/PQconsumeInput/PQisBusy/PQgetResult), and a
// uv_poll on PQsocket() is re-armed for each state, as PgBouncer's
// test/asynctest.c does. Nothing here ever blocks the loop.
//
// Queries queue up and run one after another in submission order. Every
// parameter is bound (text format); SQL is never assembled from values.
#pragma once

#include <libpq-fe.h>
#include <uv.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
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

  // Starts connecting; cb runs on the loop once connected or failed.
  void connect(const std::string& conninfo, ConnectCallback cb);

  // Queues a statement. cb runs on the loop with the (last) result, or an
  // Error carrying the server's message and SQLSTATE in Error::code.
  void query(std::string sql, std::vector<Param> params, QueryCallback cb);

  bool connected() const { return state_ == State::Idle || state_ == State::Busy; }
  bool broken() const { return state_ == State::Broken; }
  size_t queued() const { return queue_.size() + (state_ == State::Busy ? 1 : 0); }

 private:
  enum class State { Fresh, Connecting, Idle, Busy, Broken };
  struct Pending {
    std::string sql;
    std::vector<Param> params;
    QueryCallback cb;
  };

  static void onPoll(uv_poll_t* h, int status, int events);
  void watch(int events);
  void stepConnect();
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
  State state_ = State::Fresh;
  ConnectCallback onConnect_;
  std::deque<Pending> queue_;
  std::optional<Pending> current_;
  PgResult last_;
  std::optional<Error> error_;
  // Guards against `this` being destroyed inside a user callback.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::store
