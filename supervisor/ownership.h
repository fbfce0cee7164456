// Ownership: this engine run's hold on its interfaces when several engines
// share one database (issue #21; the SQL is schema/ownership.h).
//
// start() opens a connection of its own (TCP keepalives 10 s, then 3
// probes 5 s apart; idle_session_timeout off), takes a session advisory
// lock with a random key there, records the engine with that key, claims
// every queued interface in one transaction (all or none), then runs the
// lanes guard. Another live engine owning one of them fails the start with
// kind OwnedElsewhere (the run exits kExitOwnedElsewhere) and says who.
//
// monitor() then checks the connection every 2 s with a query that must
// answer within 3 s (it also reads the other live engines for the status
// views). A connection error or a timeout means the lock may be gone:
// `lost` runs (the engine pauses delivery, files and schedules; intake
// keeps storing), and the lock is taken again on a new connection, with a
// new key, and the claims checked again: `regained` if they are still
// ours, `taken` if another engine claimed one meanwhile (the engine stops
// and exits kExitOwnedElsewhere).
//
// Everything runs on the engine's loop through async libpq; nothing waits.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/uv_handle.h"
#include "schema/ownership.h"
#include "schema/pg_connection.h"

namespace ductus::api {
struct EngineInfo;
}

namespace ductus::supervisor {

// `ductus run` exits with this when another live engine owns one of its
// interfaces, at start or after a lost lock (RestartPreventExitStatus=3 in
// the unit: restarting would only collide again).
inline constexpr int kExitOwnedElsewhere = 3;

struct OwnedInterface {
  int64_t id = 0;
  std::string name;
  uint32_t partitions = 1;  // the lanes it has now (ordering.partitions, else 1)
};

struct OwnershipTiming {
  std::chrono::milliseconds checkEvery{2000};
  std::chrono::milliseconds checkTimeout{3000};
  // After a lost lock, between tries to take it again.
  std::chrono::milliseconds retakeEvery{2000};
  // A standby takes over only once no live engine has owned the interfaces
  // for this long: more than an owner needs to take its lock again
  // (retakeEvery and a connect) after losing it for a moment.
  std::chrono::milliseconds standbyGrace{4000};
};

class Ownership {
 public:
  enum class State { Starting, Standby, Held, Lost, Taken, Released };

  struct Hooks {
    std::function<void()> lost;
    std::function<void()> regained;
    std::function<void(const Error&)> taken;  // kind OwnedElsewhere; says who
  };

  Ownership(uv_loop_t* loop, std::string conninfo, OwnershipTiming timing = {});
  ~Ownership();
  Ownership(const Ownership&) = delete;
  Ownership& operator=(const Ownership&) = delete;

  // Lock, claims, lanes guard. Errors: OwnedElsewhere (one line per interface
  // owned elsewhere), Stranded (one line per interface), or the
  // database's.
  void start(std::vector<OwnedInterface> interfaces, std::function<void(Status)> done);
  // Connects and takes the session lock now; start() or prepare() then
  // wait for it. The lock needs no schema, so an engine takes it while its
  // migrations run: one connection's set-up fewer on the way to listening.
  void lockAhead();
  // A handover's new engine (supervisor/handover.h), before the old one
  // has released: its own lock and engines row, no claim; refused
  // (OwnedElsewhere) as start() would be when a live engine other than
  // `predecessor` owns one of the interfaces; then the lanes guard.
  // takeCharge() claims, once the predecessor released, and guards again.
  void prepare(std::vector<OwnedInterface> interfaces, std::string predecessor,
               std::function<void(Status)> done);
  void takeCharge(std::function<void(Status)> done);
  // A standby (`ductus run --standby`): its own lock and engines row, no
  // claim, nobody refused; then the lanes guard. tryCharge() then tries to
  // claim every interface (all or none): true once claimed and guarded,
  // false while a live engine still owns one (others() says which) or owned
  // one less than standbyGrace ago. A lock connection that failed while
  // waiting is made again first.
  void standBy(std::vector<OwnedInterface> interfaces, std::function<void(Status)> done);
  void tryCharge(std::function<void(Result<bool>)> done);
  void monitor(Hooks hooks);
  // A clean stop: deletes the claims and marks the engine stopped (when
  // the lock is still held; else there is nothing of ours to trust), then
  // closes the connection, which releases the lock. Answers within the
  // check timeout whatever the database does.
  void release(std::function<void()> done);

  const std::string& engineId() const { return me_.id; }
  State state() const { return state_; }
  // The other live engines, as of the last check.
  const std::vector<store::LiveEngine>& others() const { return others_; }
  // What this engine owns (names), once claimed.
  std::vector<std::string> owned() const;
  // engineId, ownership ("held", "lost", ...) and the other live engines,
  // for GET /engine and ductusctl status.
  void describe(api::EngineInfo& e) const;

 private:
  // Connects, sets the session up and takes a lock with a fresh key.
  void takeLock(std::function<void(Status)> done);
  // takeLock() once for the start, whoever asks first (lockAhead, start,
  // prepare); every caller hears its outcome.
  void firstLock(std::function<void(Status)> done);
  // Sets the interfaces, then `then` once the start's lock is held; an
  // error taking it goes to `done`, said as such.
  void afterLock(std::vector<OwnedInterface> interfaces, std::function<void(Status)> done,
                 std::function<void()> then);
  void tryKey(int attempt, std::function<void(Status)> done);
  void claim(std::function<void(Status)> done);
  // Claims nothing (which records this engine and clears dead ones' rows),
  // then reads the other live engines into others_.
  void record(std::function<void(Status)> done);
  void readOthers(std::function<void(Status)> done);
  void guardLanes(bool releaseOnRefusal, std::function<void(Status)> done);
  void check();
  void onCheckTimeout();
  void lose(const std::string& why);
  void retake();
  void finishRelease();

  uv_loop_t* loop_;
  std::string conninfo_;
  OwnershipTiming timing_;
  std::unique_ptr<store::PgConnection> conn_;
  store::EngineRow me_;
  std::vector<OwnedInterface> interfaces_;
  std::optional<Status> firstLock_;  // the start's lock, once taken or failed
  std::vector<std::function<void(Status)>> afterFirstLock_;
  bool firstLockAsked_ = false;
  // tryCharge(): since when no live engine has owned the interfaces.
  std::optional<std::chrono::steady_clock::time_point> ownerGoneSince_;
  State state_ = State::Starting;
  Hooks hooks_;
  std::vector<store::LiveEngine> others_;
  UvHandle<uv_timer_t> checkTimer_, timeoutTimer_, retakeTimer_;
  uint64_t checkSeq_ = 0;  // the check in flight (0: none)
  uint64_t lastCheck_ = 0;
  int retakeFailures_ = 0;
  std::function<void()> releaseDone_;  // while release() waits for the database
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
