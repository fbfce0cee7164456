// Retention, the SQL side: which time partitions have outlived their tier,
// dropping them without holding up intake, each interface's applied tier
// (interface_retention, migration 0004) and the dedupe keys past their
// window. On one async libpq connection of its own on the caller's loop:
// DETACH ... CONCURRENTLY can't run inside a transaction, and the session's
// lock_timeout must not leak into the store's pool.
//
// Drops: a period (a day in the 1w tier, a week in 3w/7w) goes once its
// whole period is older than its tier's days; its messages and deliveries
// partitions go together. Its unfinished messages (pending, or quarantined
// where the interface keeps them) first move, each with all its
// deliveries, to the held area: tier 0, a partition a month (migration
// 0013). The move works in batches of moveBatch messages, busy at most half
// the time, locking messages and then their deliveries in id order with
// SKIP LOCKED: it never waits on a row, so it can't deadlock with settling
// or the API's actions, and what it skipped goes at the next run (the
// period waits until then). Held rows are still rows of messages and
// deliveries, in their destination's queue index in id order: a held
// message is still delivered before the newer messages of its lane. The
// store's statements find a row that moved under them (schema/store_sql.h).
// A held month goes once it is over and nothing in it is unfinished.
//
// Each table is detached with DETACH PARTITION ... CONCURRENTLY (no lock
// that conflicts with inserts or reads: it waits for the queries that
// started before it instead), checked again for unfinished rows
// (re-attached if some appeared: a resend), then dropped. Every DDL waits
// at most lock_timeout for its lock and is tried again after a pause, so a
// long report delays a drop, never the inserts queued behind it. An
// interrupted drop (a detach left pending, a detached table not dropped) is
// finished by the next run. One run at a time per database (a session
// advisory lock).
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
#include "schema/pg_connection.h"
#include "schema/pg_transaction.h"
#include "schema/store_types.h"

namespace ductus::store {

struct RetentionOptions {
  std::string conninfo;
  // How long each DDL statement waits for a lock before it gives up.
  std::chrono::milliseconds lockTimeout{200};
  // Tries per period when a lock wasn't had in time, and the pause between.
  int attempts = 10;
  std::chrono::milliseconds retryDelay{1000};
  // Dedupe keys deleted per statement.
  int64_t dedupeBatch = 5000;
  // Messages moved to the held area per transaction.
  int64_t moveBatch = 1000;
  // Interfaces whose quarantined messages go with their period
  // (`quarantined: purge`); every other interface's are held.
  std::vector<int64_t> quarantinePurged;
};

// One period of one tier (a month of the held area): its messages and
// deliveries partitions.
struct PeriodInfo {
  Tier tier = Tier::Week7;
  std::string from, to;   // YYYY-MM-DD (UTC midnights; `to` excluded)
  std::string dropsOn;    // to + the tier's days (held: to): the first day it may go
  bool expired = false;   // dropsOn has come
  // Rows: statistics' estimates in a plan, counted exactly in a drop.
  int64_t messages = 0, deliveries = 0;
  int64_t bytes = 0;      // both tables with their indexes and TOAST
  // Counted for expired periods: pending messages and deliveries, and
  // quarantined messages that are kept. What a drop moves to the held area
  // first; what keeps a held month.
  int64_t unfinished = 0;
  int64_t moved = 0;      // messages this run moved to the held area
  bool detached = false;  // an interrupted drop left a table detached or detaching
};

struct RetentionPlan {
  std::vector<PeriodInfo> periods;  // by tier, then period
};

// An interface whose stored messages follow the tier that applies to it.
struct StoredTier {
  int64_t interfaceId = 0;
  Tier applied = Tier::Week7;
  bool purgeQuarantined = false;  // `quarantined: purge`
};

struct TierMoves {
  int64_t moved = 0;     // messages moved to their interface's tier
  int64_t deleted = 0;   // finished messages the shorter tier no longer keeps
  int64_t deferred = 0;  // interfaces left for the next run (a lock not had in time)
};

struct DropReport {
  bool busy = false;                // another run held the database's retention lock
  std::vector<PeriodInfo> dropped;  // exact rows and bytes freed
  // Expired retention periods still there: rows the move skipped (someone
  // held them) or a resend made pending during the drop. Tried next run.
  std::vector<PeriodInfo> held;
  int64_t moved = 0;                // messages moved to the held area, in all
  TierMoves tierMoves;              // stored messages brought to their interface's tier
  std::vector<std::string> failed;  // "1w 2025-01-01: why" (tried again next run)
};

// What the held area holds, counted after each run (every held row: not
// something to count per request).
struct HeldCounts {
  int64_t pending = 0, quarantined = 0, finished = 0;  // messages
  int64_t deliveries = 0;
  int64_t bytes = 0;  // every held table with its indexes and TOAST
  int months = 0;     // held partitions (of messages)
};

// An interface as the project has it, for the tier check.
struct InterfaceTier {
  int64_t interfaceId = 0;
  std::string name;
  Tier configured = Tier::Week7;
};

struct TierState {
  enum class Change {
    None,             // the project's tier is the applied one
    New,              // first start of the interface
    Lengthened,       // applied at once: nothing is dropped sooner
    Waiting,          // shorter: waits for `ductus retention confirm`
  };
  int64_t interfaceId = 0;
  std::string name;
  Tier configured = Tier::Week7;
  Tier applied = Tier::Week7;  // where the interface's new messages go
  Change change = Change::None;
  std::optional<std::string> requestedAt;  // Waiting: since when
};

struct DedupeWindow {
  int64_t interfaceId = 0;
  int64_t seconds = 0;
};

// "1w" / "3w" / "7w" ("held" for the held area).
const char* tierName(Tier t);
// The tier so named ("1w", "3w", "7w"), or none.
std::optional<Tier> tierNamed(std::string_view name);

// A confirmation's row (POST /retention/confirm), for the transaction of
// its audit row: the interface's tier, when `tier` is shorter than the
// applied one. Answers the interface's id; no row: nothing to confirm.
SqlStatement confirmTierStatement(const std::string& interface, Tier tier);
// "12.3 MB".
std::string describeBytes(int64_t bytes);

class Retention {
 public:
  template <typename T>
  using Callback = std::function<void(Result<T>)>;
  using Done = std::function<void(Status)>;

  Retention(uv_loop_t* loop, RetentionOptions options);
  ~Retention();
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  // Judges each interface's project tier against the applied one and
  // records the outcome: a new interface or a longer tier applies at once;
  // a shorter one is recorded as requested and the applied tier stays, so
  // nothing is deleted sooner than promised until someone confirms.
  void applyTiers(std::vector<InterfaceTier> interfaces, Callback<std::vector<TierState>> cb);
  // The same judgement, changing nothing (`ductus retention`).
  void readTiers(std::vector<InterfaceTier> interfaces, Callback<std::vector<TierState>> cb);
  // Applies a shorter tier (`ductus retention confirm`). Answers false when
  // there was nothing to confirm (the tier isn't shorter than the applied one).
  void confirm(int64_t interfaceId, Tier tier, Callback<bool> cb);

  // Every period with its size, when it drops and, for expired ones, what
  // still holds it.
  void plan(Callback<RetentionPlan> cb);
  // Moves the unfinished messages of every expired period to the held
  // area, then drops each period left with nothing unfinished, and each
  // held month that is over with nothing unfinished in it; then brings the
  // stored messages of the interfaces setStoredTiers() names to their tier
  // (applyTiersToStored), under the same lock.
  void dropExpired(Callback<DropReport> cb);
  void setStoredTiers(std::vector<StoredTier> interfaces) { storedTiers_ = std::move(interfaces); }
  // Counts the held area.
  void countHeld(Callback<HeldCounts> cb);
  // Brings each interface's finished messages stored in another retention
  // tier to the one that applies now (a tier confirmed shorter, or
  // lengthened): those the new tier would already have dropped are
  // deleted (kept quarantined ones stay, for the held area to take), the
  // rest move with their deliveries. Pending messages move once finished,
  // at a later run. In batches of moveBatch, busy at most half the time.
  void applyTiersToStored(std::vector<StoredTier> interfaces, Callback<TierMoves> cb);
  // Deletes dedupe keys older than their interface's window, in batches;
  // keys of interfaces not listed (removed from the project) after
  // othersSeconds. Answers how many went.
  void purgeDedupeKeys(std::vector<DedupeWindow> windows, int64_t othersSeconds,
                       Callback<int64_t> cb);

 private:
  struct Table;
  struct Period;
  void withConnection(std::function<void(Result<PgConnection*>)> cb);
  void judge(std::vector<InterfaceTier> interfaces, bool write,
             Callback<std::vector<TierState>> cb);
  void listPeriods(Callback<std::vector<std::shared_ptr<Period>>> cb);
  void countUnfinished(std::shared_ptr<Period> p, Callback<int64_t> cb);
  std::string unfinishedMessages(const std::string& messages, const std::string& deliveries) const;
  void holdPeriod(std::shared_ptr<Period> p, Done done);
  void ensureHeld(std::shared_ptr<Period> p, size_t i, Done done);
  void moveBatches(std::shared_ptr<Period> p, std::shared_ptr<int64_t> afterId, Done done);
  void moveStrays(std::shared_ptr<Period> p, Done done);
  void ensureWindow(Tier tier, size_t i, Done done);
  void applyTierBatches(StoredTier iface, Tier from, std::shared_ptr<int64_t> afterId,
                        std::shared_ptr<TierMoves> total, Done done);
  void dropEach(std::shared_ptr<std::vector<std::shared_ptr<Period>>> periods, size_t i,
                std::shared_ptr<DropReport> report, Done done);
  void dropPeriod(std::shared_ptr<Period> p, int attempt, std::shared_ptr<DropReport> report,
                  Done done);
  void refreshThenDrop(std::shared_ptr<Period> p, int attempt, std::shared_ptr<DropReport> report,
                       Done done);
  void dropSteps(std::shared_ptr<Period> p, Done done);
  // onlyInterrupted: FINALIZE the detaches an interrupted drop left, nothing else.
  void detachEach(std::shared_ptr<Period> p, size_t i, Done done, bool onlyInterrupted = false);
  void reattachEach(std::shared_ptr<Period> p, size_t i, Done done);
  void exec(std::string sql, Callback<PgResult> cb);
  void purgeBatches(std::string sql, std::vector<Param> params, int64_t sofar,
                    Callback<int64_t> cb);
  void after(std::chrono::milliseconds delay, std::function<void()> fn);

  uv_loop_t* loop_;
  RetentionOptions options_;
  std::vector<StoredTier> storedTiers_;
  std::unique_ptr<PgConnection> conn_;
  std::vector<std::function<void(Result<PgConnection*>)>> waiting_;  // for conn_ to connect
  UvHandle<uv_timer_t> timer_;  // a drop's pause before trying again
  std::function<void()> onTimer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::store
