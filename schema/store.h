// Store: every statement the engine runs to store and move messages, on a
// pool of async libpq connections on the caller's libuv loop (what the API
// reads and an operator changes of them: message_pages.h and
// message_actions.h, on the same pool). Every call returns at once and
// answers through its callback, on the loop.
//
// Locking rules (they keep per-key order and at-least-once delivery safe
// when destinations, resends and retries touch the same rows at once):
// - a message, its deliveries and its dedupe claim go in one statement, so
//   one commit per acknowledgement;
// - delivery updates change only rows still pending, so a retried flush
//   changes nothing twice;
// - settle locks the message rows in id order in a statement of its own and
//   only then reads their deliveries (a fresh snapshot): two destinations
//   settling overlapping sets cannot deadlock, and a resend that moved a
//   delivery back to pending while holding the lock is seen;
// - partitions are created one table and tier per transaction, waiting at
//   most 2 s for the lock (store_partitions.cpp);
// - every statement that updates messages or deliveries is retried on
//   serialization failure (40001) and deadlock (40P01).
#pragma once

#include <uv.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "schema/pg_pool.h"
#include "schema/store_types.h"

namespace ductus::store {

struct StoreOptions {
  std::string conninfo;
  size_t poolSize = 8;
  int maxRetries = 50;  // per statement, for 40001 / 40P01
  // Single inserts that wait for a connection together (same interface,
  // tier, destinations and durability) are stored in one statement and one
  // commit; each caller is still answered only after that commit. A group
  // that fails is stored again message by message, so one bad message
  // can't refuse the others. Off: one statement and commit per insert.
  bool coalesceInserts = true;
  size_t maxInsertGroup = 50;
  // Insert statements in flight at once (when coalescing); 0: the pool
  // size. A group has at most one statement running: its next inserts wait
  // for that commit and go together. (16 MLLP connections to one interface,
  // 2 cores: one statement a group 9,400 ACKs/s, 2: 8,100, 8: 6,600, since
  // each statement's executor start and commit cost more than its rows.
  // With a file destination delivering meanwhile, two a group did no
  // better either: 0.38-0.45 x pgbench against 0.47-0.53 for one.)
  int maxInsertStatements = 0;
  // The server cancels any statement of the store's connections that runs
  // longer than this (statement_timeout, SQLSTATE 57014), so a table locked
  // by someone else or a server too slow to answer fails the statement (an
  // insert then answers AE / 503, as any failed store does, and nothing
  // acknowledged is lost) instead of holding the connection and the sender
  // forever. Not retried here: the caller's own retry (a sender's resend, a
  // delivery loop's back-off) is the retry. 0: no limit. The engine keeps
  // this default (nothing in ductus.yaml sets it); tests lower it.
  // Migrations run on a connection of their own without it: a heavy
  // migration may take longer.
  std::chrono::milliseconds statementTimeout{30000};
  // Payload bytes a queue read returns at most (its first row whatever its
  // size): the supervisor holds a read's payloads while it works on them,
  // and fifty 64 MB messages would be 3.2 GB.
  int64_t queueReadBytes = 64ll << 20;
};

class Store {
 public:
  template <typename T>
  using Callback = std::function<void(Result<T>)>;
  using Done = std::function<void(Status)>;

  // Rows a queue read returns at most. The queue index (deliveries_queue)
  // stops after this many matching rows, so a read costs the same with a
  // thousand or half a million waiting.
  static constexpr int kQueueReadRows = 50;
  // Deliveries a status flush changes at most.
  static constexpr size_t kFlushRows = 50;

  Store(uv_loop_t* loop, StoreOptions options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Connects the pool. Migrations are the Migrator's (run it first).
  void start(Done cb);
  // The same, `first` (the migrations' connection, idle) being the pool's
  // first connection (PgPool::start).
  void start(std::unique_ptr<PgConnection> first, Done cb);

  // Registry: the id of a name, registered on first use.
  void ensureInterface(const std::string& name, Callback<int64_t> cb);
  void ensureDestination(int64_t interfaceId, const std::string& name, Callback<int64_t> cb);
  // Many at once, in one statement a call (what a start does): every name's
  // id, by name; by (interface id, name) for destinations.
  void registerInterfaces(std::vector<std::string> names,
                          Callback<std::map<std::string, int64_t>> cb);
  using DestinationKey = std::pair<int64_t, std::string>;
  void registerDestinations(std::vector<DestinationKey> keys,
                            Callback<std::map<DestinationKey, int64_t>> cb);

  // One message, its deliveries and its dedupe claim in one transaction (one
  // commit, possibly shared with inserts that waited alongside it: see
  // StoreOptions::coalesceInserts). A dedupe hit is stored as Duplicate and
  // never queued.
  void insert(NewMessage m, Callback<StoredMessage> cb);
  // Many messages of one interface in one transaction, ids in the batch's
  // order; a key repeated inside the batch is a duplicate after its first.
  // The source_state write commits with them. Answers counts, not rows.
  void insertBatch(NewBatch b, Callback<BatchStored> cb);

  // Stores a message quarantined at intake: `reason` in last_error, no
  // delivery, no dedupe claim (m.destinationIds and m.dedupeKey are not
  // read), with the source's progress in the same statement.
  void insertRefused(NewMessage m, std::string reason, std::optional<SourceStateWrite> state,
                     Callback<StoredMessage> cb);

  // Up to kQueueReadRows pending deliveries of one destination in message
  // id order, after afterMessageId, in the given lanes (empty: all lanes),
  // and no more than maxBytes of payload (at least one row; 0: the
  // store's StoreOptions::queueReadBytes).
  void readQueue(int64_t destinationId, std::vector<int32_t> lanes, int64_t afterMessageId,
                 Callback<QueueRead> cb, int64_t maxBytes = 0);

  // Writes up to kFlushRows outcomes of one destination; only pending rows
  // change. Answers the ids of the messages whose delivery changed.
  // InTheFlush: the destination is its interface's only one, so each message
  // takes its delivery's final status in the same statement (no settle()
  // needed for the ids answered).
  enum class Settle { Separately, InTheFlush };
  void flushStatuses(int64_t destinationId, std::vector<DeliveryOutcome> outcomes,
                     Callback<std::vector<int64_t>> cb, Settle settles = Settle::Separately);

  // Sets each message's overall status from its deliveries. Answers how
  // many messages changed. Safe to retry alone after a committed flush.
  void settle(std::vector<MessageRef> messages, Callback<int64_t> cb);

  // A route's flush: marks this destination's pending deliveries of the
  // items sent and stores the target's messages for exactly those, in one
  // transaction with synchronous_commit off. Answers what was stored.
  void finishRouted(RoutedBatch b, Callback<std::vector<RoutedMessage>> cb);

  // Moves one delivery back to pending (and its message), holding the
  // message's row lock as settle does. Answers whether it changed anything.
  void resend(const MessageRef& message, int64_t destinationId, Callback<bool> cb);

  // Start-up repair of one interface's rows (activeDestinationIds: the
  // destinations the project has now), in statements of at most pageRows
  // rows each, so none outlasts the statement timeout however many wait.
  static constexpr int64_t kReconcilePageRows = 10000;
  void reconcile(int64_t interfaceId, std::vector<int64_t> activeDestinationIds,
                 Callback<ReconcileReport> cb, int64_t pageRows = kReconcilePageRows);
  // Settles messages left pending with no pending delivery. Answers how many.
  void settleFinished(int64_t interfaceId, Callback<int64_t> cb);
  // Interfaces with a pending message or delivery (loose index scans).
  void withWaiting(Callback<std::vector<WaitingInterface>> cb);
  // Pending deliveries per destination id (destinations with none are left
  // out): a count over the partial queue index, which holds only pending
  // rows, so it costs what is waiting, not what was ever stored.
  void waitingCounts(Callback<std::map<int64_t, int64_t>> cb);
  // Quarantined deliveries per destination id, likewise from the partial
  // index deliveries_quarantined (migration 0005).
  void quarantinedCounts(Callback<std::map<int64_t, int64_t>> cb);
  // Is a message of this interface still pending? (schedules skip a run)
  void hasPending(int64_t interfaceId, Callback<bool> cb);

  void getSourceState(int64_t interfaceId, const std::string& key,
                      Callback<std::optional<std::string>> cb);
  void putSourceState(int64_t interfaceId, const std::string& key, const std::string& json,
                      Done cb);

  // Deletes dedupe keys first seen more than `seconds` ago. Answers how many.
  void purgeDedupeKeys(int64_t seconds, Callback<int64_t> cb);

  // Creates the partitions of the coming days (store_partitions.cpp).
  void ensurePartitions(PartitionOptions options, Callback<PartitionReport> cb);

  const StoreStats& stats() const { return stats_; }
  // The store's connections, lent to what the engine keeps beside the
  // messages (accounts, sessions, the audit log, pauses) and to the API's
  // reads and actions on messages (schema/message_pages.h,
  // schema/message_actions.h), so the engine holds one pool of
  // StoreOptions::poolSize connections. Every statement on messages and
  // deliveries is this class's or those files': none is written elsewhere.
  PgPool& sharedConnections() { return pool_; }

 private:
  struct Statement {
    const char* name;
    const char* sql;
    bool binaryResults = false;  // PgConnection::execute
  };
  using LeasePtr = PgPool::LeasePtr;
  using TxBody = std::function<void(LeasePtr, Done)>;

  // One prepared statement on a pooled connection, retried on 40001/40P01
  // when `retry` (statements that update messages or deliveries).
  void run(const Statement& s, std::vector<Param> params, std::vector<int> formats, bool retry,
           Callback<PgResult> cb, int attempt = 0);
  // BEGIN, body, COMMIT on one leased connection; the whole transaction is
  // run again on 40001/40P01.
  void transaction(TxBody body, Done done, int attempt = 0);
  bool retryable(const Error& e, int attempt);
  // Runs a statement that changes at most pageRows rows again and again
  // until it changes fewer. Answers the rows changed in all.
  void runPaged(const Statement& s, std::vector<Param> params, std::vector<int> formats,
                int64_t pageRows, Callback<int64_t> cb, int64_t doneSoFar = 0);
  struct QueuedInsert {
    NewMessage m;
    Callback<StoredMessage> cb;
    std::string group;  // which inserts one statement can carry with it
  };
  // Stores the waiting inserts of one group (same interface, tier,
  // destinations and durability: one statement can carry them), in arrival
  // order, on this lease.
  void insertGroup(LeasePtr lease, std::string group);
  // Starts insert statements while some wait and fewer than the limit run.
  void pumpInserts();
  // Stores these one statement each, in order (a failed group's retry).
  void insertEach(std::shared_ptr<std::deque<QueuedInsert>> items);
  void insertOne(QueuedInsert q);
  void settleChunk(std::shared_ptr<std::vector<MessageRef>> rest, std::shared_ptr<int64_t> changed,
                   Callback<int64_t> cb);
  void settleLocked(std::vector<MessageRef> chunk, std::shared_ptr<std::vector<MessageRef>> rest,
                    std::shared_ptr<int64_t> changed, Callback<int64_t> cb);

  StoreOptions options_;
  PgPool pool_;
  StoreStats stats_;
  std::deque<QueuedInsert> inserts_;  // waiting for a statement, in arrival order
  int insertStatements_ = 0;          // coalesced insert statements running
  std::set<std::string> insertingGroups_;  // groups with a statement running
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::store
