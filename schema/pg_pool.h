// PgPool: N PgConnections on one libuv loop. A caller leases a connection
// (a Lease), sends one statement or a whole transaction on it, and drops the
// lease; statements queue for a free connection. A connection found broken
// when its lease ends is replaced by a fresh one. Nothing here blocks.
//
// Each slot is in exactly one state, and only setState() moves it:
//   Connecting - a connect is under way
//   Idle       - connected, in idle_ (free for the next waiter)
//   Leased     - a Lease holds it
//   Down       - last connect failed; tried again on the next acquire
#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_connection.h"

namespace ductus::store {

class PgPool {
  struct Shared;

 public:
  // Holds one connection until destroyed. Shared (std::function needs
  // copyable captures); the last copy returns the connection.
  class Lease {
   public:
    Lease(std::shared_ptr<Shared> pool, size_t slot);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    PgConnection& conn();

   private:
    std::shared_ptr<Shared> pool_;
    size_t slot_;
  };
  using LeasePtr = std::shared_ptr<Lease>;
  using LeaseCallback = std::function<void(Result<LeasePtr>)>;

  // `setup` (SQL, may be empty) runs on every new connection before its
  // first lease: session settings the statements rely on.
  PgPool(uv_loop_t* loop, std::string conninfo, size_t size, std::string setup = {});
  ~PgPool();
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // Connects one slot: cb hears whether the database answers. The others
  // open when callers wait for them (dispatch), as many as wait: each new
  // backend costs the server a fork (14 ms here, one at a time in the
  // postmaster), and an engine of 1,001 interfaces opening all 8 at once
  // spent 116 ms of its start-up waiting for connections nobody used yet.
  void start(std::function<void(Status)> cb);
  // The same with `first` (connected to the same database, idle, its
  // session as a new one's but for what `setup` sets) as that slot: the
  // engine's migration check hands its connection on rather than the
  // pool forking another backend. A broken or null one: start(cb).
  void start(std::unique_ptr<PgConnection> first, std::function<void(Status)> cb);

  // cb runs with a lease once a connection is free, or with the connect
  // error when no connection can be made.
  void acquire(LeaseCallback cb);

  size_t size() const;
  size_t waiting() const;

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace ductus::store
