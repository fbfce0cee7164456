#include "schema/store.h"

#include <algorithm>
#include <set>

#include "common/log.h"
#include "common/sha256.h"
#include "common/text.h"
#include "schema/conninfo.h"
#include "schema/pg_binary.h"
#include "schema/pg_error.h"
#include "schema/pg_values.h"
#include "schema/store_sql.h"

namespace ductus::store {
namespace {

namespace pb = pgbinary;
constexpr int kText = 0, kBinary = 1;

std::string num(int64_t v) { return std::to_string(v); }

// The three columns every message key travels as.
struct RefArrays {
  std::string ids, tiers, ats;
  std::string from, to;  // the span of received_at, for partition pruning
  // The batch's distinct tiers as three scalars (repeating the first): a
  // generic plan prunes LIST partitions by `tier IN ($a, $b, $c)` but not by
  // `tier = ANY ($array)` (PostgreSQL 15 expands only constant arrays), and
  // probing the other tiers' partitions was over half a flush's buffer reads.
  std::string tierA, tierB, tierC;
};

RefArrays refArrays(const std::vector<MessageRef>& refs) {
  std::vector<int64_t> ids;
  std::vector<int16_t> tiers;
  std::vector<std::string> ats;
  for (auto& r : refs) {
    ids.push_back(r.id);
    tiers.push_back(static_cast<int16_t>(r.tier));
    ats.push_back(r.receivedAt);
  }
  // received_at travels as Postgres printed it on a UTC session (the pool's
  // setup), "YYYY-MM-DD HH:MM:SS[.ffffff]+00", so text order is time order.
  std::string from, to;
  if (!ats.empty()) {
    auto [lo, hi] = std::minmax_element(ats.begin(), ats.end());
    from = *lo;
    to = *hi;
  }
  // The held area (0) is in every statement as a literal: at most the
  // three retention tiers remain.
  std::vector<int16_t> distinct;
  for (int16_t t : tiers)
    if (t != 0 && std::find(distinct.begin(), distinct.end(), t) == distinct.end())
      distinct.push_back(t);
  while (!distinct.empty() && distinct.size() < 3) distinct.push_back(distinct.front());
  auto tierText = [&](size_t k) {
    return distinct.empty() ? std::string("0") : std::to_string(distinct[k]);
  };
  return {pb::int8Array(ids), pb::int2Array(tiers), pb::bytesArray(pb::kText, ats),
          std::move(from),    std::move(to),        tierText(0),
          tierText(1),        tierText(2)};
}

// Every store connection: generic plans, because planning the statements on
// partitioned tables cost more than running them (perf: ~75% of Postgres's
// CPU at one MLLP connection was the planner); the statements carry their
// partition keys as parameters so the executor still prunes. UTC, so
// received_at prints with one offset (see refArrays). No JIT: a generic
// plan's estimates (LIMIT $n is taken as a tenth of the table) put short
// statements past jit_above_cost, and compiling took 250 ms of a browser
// page that runs in 0.2 ms; nothing here scans enough to gain from it.
const char* const kSessionSetup =
    "SET plan_cache_mode = force_generic_plan; SET TimeZone = 'UTC'; SET jit = off";

// The pool's setup with StoreOptions::statementTimeout. A SET, not the
// startup packet's `options`: connection poolers refuse unknown startup
// parameters. SET takes no bound parameter; the value is a number of ours.
std::string sessionSetup(const StoreOptions& o) {
  // A transaction of an engine whose host vanished must not hold its rows'
  // locks for hours against the engine that takes over.
  std::string setup = std::string(kSessionSetup) + "; " + kServerSideKeepalives;
  if (o.statementTimeout.count() > 0)
    setup += "; SET statement_timeout = " + std::to_string(o.statementTimeout.count());
  return setup;
}

Tier tierOf(long long v) { return static_cast<Tier>(static_cast<int16_t>(v)); }

// Rows of (id, tier, received_at, status) as StoredMessage.
std::vector<StoredMessage> storedRows(const PgResult& r) {
  std::vector<StoredMessage> out;
  out.reserve(r.rows());
  for (int i = 0; i < r.rows(); ++i) {
    StoredMessage s;
    s.ref.id = r.integer(i, 0);
    s.ref.tier = tierOf(r.integer(i, 1));
    s.ref.receivedAt = std::string(r.text(i, 2));
    s.status = static_cast<MessageStatus>(r.integer(i, 3));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::string searchableText(std::string_view raw) {
  std::string text = asDatabaseText(raw);
  if (text.size() > kMaxSearchableBytes) return "sha256:" + sha256Hex(text);
  return text;
}

Store::Store(uv_loop_t* loop, StoreOptions options)
    : options_(std::move(options)),
      pool_(loop, options_.conninfo, options_.poolSize, sessionSetup(options_)) {}

Store::~Store() { *alive_ = false; }

void Store::start(Done cb) { pool_.start(std::move(cb)); }

void Store::start(std::unique_ptr<PgConnection> first, Done cb) {
  pool_.start(std::move(first), std::move(cb));
}

bool Store::retryable(const Error& e, int attempt) {
  if (attempt >= options_.maxRetries || !pg::retryable(e)) return false;
  ++(pg::deadlock(e) ? stats_.deadlockRetries : stats_.serializationRetries);
  return true;
}

void Store::run(const Statement& s, std::vector<Param> params, std::vector<int> formats,
                bool retry, Callback<PgResult> cb, int attempt) {
  auto alive = alive_;
  pool_.acquire([this, alive, s, params = std::move(params), formats = std::move(formats), retry,
                 cb = std::move(cb), attempt](Result<LeasePtr> lease) mutable {
    if (!*alive) return;
    if (!lease) return cb(lease.error());
    auto copy = params;
    auto fcopy = formats;
    PgConnection& conn = (*lease)->conn();
    conn.execute(
        s.name, s.sql, std::move(copy), std::move(fcopy),
        [this, alive, lease = *lease, s, params = std::move(params), formats = std::move(formats),
         retry, cb = std::move(cb), attempt](Result<PgResult> r) mutable {
          if (!*alive) return;
          if (!r && retry && retryable(r.error(), attempt)) {
            lease.reset();  // back to the pool before trying again
            return run(s, std::move(params), std::move(formats), retry, std::move(cb),
                       attempt + 1);
          }
          lease.reset();
          cb(std::move(r));
        },
        s.binaryResults);
  });
}

void Store::transaction(TxBody body, Done done, int attempt) {
  auto alive = alive_;
  pool_.acquire([this, alive, body = std::move(body), done = std::move(done),
                 attempt](Result<LeasePtr> lease) mutable {
    if (!*alive) return;
    if (!lease) return done(lease.error());
    LeasePtr l = *lease;
    l->conn().script("BEGIN", [](Result<PgResult>) {});
    // The body's statements queue behind BEGIN on the same connection.
    auto again = [this, alive, body, done, attempt, l](Status s) mutable {
      if (!*alive) return;
      auto finish = [this, alive, body, done, attempt, l](Status s) mutable {
        if (!*alive) return;
        if (!s.ok() && retryable(s.error(), attempt)) {
          l.reset();
          return transaction(std::move(body), std::move(done), attempt + 1);
        }
        l.reset();
        done(s);
      };
      if (!s.ok()) {
        // ROLLBACK answers even on an aborted transaction; keep the cause.
        l->conn().script("ROLLBACK", [finish, s](Result<PgResult>) mutable { finish(s); });
        return;
      }
      l->conn().script("COMMIT", [finish](Result<PgResult> r) mutable {
        if (!r) return finish(r.error());
        finish({});
      });
    };
    body(l, std::move(again));
  });
}

// ---- Registry -------------------------------------------------------------

// One name: the batch statements with a single entry (one code path, one
// statement each, for a start's 1,001 names and for one).
void Store::ensureInterface(const std::string& name, Callback<int64_t> cb) {
  registerInterfaces({name}, [name, cb](Result<std::map<std::string, int64_t>> r) {
    if (!r) return cb(r.error());
    cb(r->at(name));
  });
}

void Store::ensureDestination(int64_t interfaceId, const std::string& name,
                              Callback<int64_t> cb) {
  DestinationKey key{interfaceId, name};
  registerDestinations({key}, [key, cb](Result<std::map<DestinationKey, int64_t>> r) {
    if (!r) return cb(r.error());
    cb(r->at(key));
  });
}

namespace {

// Asks `ask` (the statement over every name) until each name has its id;
// a second miss means someone removes what this adds.
template <typename Key>
void registerAll(std::function<void(Store::Callback<PgResult>)> ask,
                 std::function<Key(const PgResult&, int)> keyOf, std::vector<Key> keys,
                 std::function<std::string(const Key&)> describe,
                 Store::Callback<std::map<Key, int64_t>> cb, int attempt = 0) {
  ask([=](Result<PgResult> r) {
    if (!r) return cb(r.error());
    std::map<Key, int64_t> ids;
    for (int i = 0; i < r->rows(); ++i) ids[keyOf(*r, i)] = r->integer(i, 0);
    for (auto& k : keys)
      if (!ids.count(k)) {
        if (attempt == 0) return registerAll(ask, keyOf, keys, describe, cb, 1);
        return cb(Error{describe(k) + " could not be registered"});
      }
    cb(std::move(ids));
  });
}

}  // namespace

void Store::registerInterfaces(std::vector<std::string> names,
                               Callback<std::map<std::string, int64_t>> cb) {
  static const Statement st{"ductus_register_interfaces", sql::kRegisterInterfaces};
  std::vector<Param> items(names.begin(), names.end());
  std::vector<Param> params{pgvalue::arrayLiteral(items)};
  registerAll<std::string>(
      [this, params](Callback<PgResult> done) { run(st, params, {}, false, std::move(done)); },
      [](const PgResult& r, int i) { return std::string(r.text(i, 1)); }, std::move(names),
      [](const std::string& n) { return "interface " + n; }, std::move(cb));
}

void Store::registerDestinations(std::vector<DestinationKey> keys,
                                 Callback<std::map<DestinationKey, int64_t>> cb) {
  static const Statement st{"ductus_register_destinations", sql::kRegisterDestinations};
  std::vector<Param> ifaces, names;
  for (auto& [id, name] : keys) {
    ifaces.push_back(std::to_string(id));
    names.push_back(name);
  }
  std::vector<Param> params{pgvalue::arrayLiteral(ifaces), pgvalue::arrayLiteral(names)};
  registerAll<DestinationKey>(
      [this, params](Callback<PgResult> done) { run(st, params, {}, false, std::move(done)); },
      [](const PgResult& r, int i) {
        return DestinationKey{r.integer(i, 1), std::string(r.text(i, 2))};
      },
      std::move(keys),
      [](const DestinationKey& k) {
        return "destination " + k.second + " (of interface id " + std::to_string(k.first) + ")";
      },
      std::move(cb));
}

// ---- Inserts ----------------------------------------------------------------

namespace {

struct InsertColumns {
  std::vector<std::string> payloads;
  std::vector<int32_t> lanes;
  std::vector<std::optional<std::string>> keys;
  std::vector<int64_t> origins;
  // MessageColumns, a column each.
  std::vector<std::optional<std::string>> types, controlIds, keyValues, charsets;

  void addColumns(MessageColumns c) {
    types.push_back(std::move(c.type));
    controlIds.push_back(std::move(c.controlId));
    keyValues.push_back(std::move(c.keyValue));
    charsets.push_back(std::move(c.charset));
  }
};

bool anyDedupeKey(const InsertColumns& c) {
  for (auto& k : c.keys)
    if (k) return true;
  return false;
}

// keyed: some message has a dedupe key (anyDedupeKey). Without one, $7 is
// NULL: the plain statements (kInsertPlainBody) do not read it.
std::vector<Param> insertParams(int64_t interfaceId, Tier tier,
                                const std::vector<int64_t>& destinations, bool relaxed,
                                const InsertColumns& c, bool keyed, Param stateKey,
                                Param stateJson) {
  return {num(interfaceId),
          num(static_cast<int16_t>(tier)),
          pb::int8Array(destinations),
          std::string(relaxed ? "t" : "f"),
          pb::bytesArray(pb::kBytea, c.payloads),
          pb::int4Array(c.lanes),
          keyed ? Param(pb::bytesArray(pb::kText, c.keys)) : Param(),
          pb::int8Array(c.origins),
          std::move(stateKey),
          std::move(stateJson),
          pb::bytesArray(pb::kText, c.types),
          pb::bytesArray(pb::kText, c.controlIds),
          pb::bytesArray(pb::kText, c.keyValues),
          pb::bytesArray(pb::kText, c.charsets)};
}

const std::vector<int> kInsertFormats{kText,   kText,   kBinary, kText,   kBinary,
                                      kBinary, kBinary, kBinary, kText,   kText,
                                      kBinary, kBinary, kBinary, kBinary};
const char* const kInsertName = "ductus_insert_messages";
const char* const kInsertBatchName = "ductus_insert_batch";
const char* const kInsertPlainName = "ductus_insert_plain_messages";
const char* const kInsertPlainBatchName = "ductus_insert_plain_batch";

// kInsertOneMessage, for a message with no dedupe key.
const char* const kInsertOneName = "ductus_insert_one_message";
const std::vector<int> kInsertOneFormats{kText, kText, kBinary, kText, kText, kText,
                                         kBinary, kText, kText, kText, kText};

std::vector<Param> insertOneParams(const NewMessage& m) {
  return {num(m.interfaceId),
          num(static_cast<int16_t>(m.tier)),
          pb::int8Array(m.destinationIds),
          std::string(m.relaxed ? "t" : "f"),
          num(m.partitionKey),
          num(m.originId.value_or(0)),
          m.payload,
          m.columns.type,
          m.columns.controlId,
          m.columns.keyValue,
          m.columns.charset};
}

// Inserts one statement can carry together.
std::string groupOf(const NewMessage& m) {
  std::string g = num(m.interfaceId) + ":" + num(static_cast<int16_t>(m.tier)) +
                  (m.relaxed ? ":r:" : ":s:");
  for (int64_t d : m.destinationIds) g += num(d) + ",";
  return g;
}

}  // namespace

void Store::insert(NewMessage m, Callback<StoredMessage> cb) {
  if (!options_.coalesceInserts) return insertOne(QueuedInsert{std::move(m), std::move(cb), {}});
  std::string group = groupOf(m);
  inserts_.push_back(QueuedInsert{std::move(m), std::move(cb), std::move(group)});
  pumpInserts();
}

void Store::pumpInserts() {
  int limit = options_.maxInsertStatements > 0 ? options_.maxInsertStatements
                                               : static_cast<int>(pool_.size());
  // Chosen first, started after: a lease can be granted at once, and
  // insertGroup then takes inserts out of the queue walked here.
  std::vector<std::string> start;
  for (auto it = inserts_.begin(); it != inserts_.end() && insertStatements_ < limit; ++it) {
    if (!insertingGroups_.insert(it->group).second) continue;  // its statement is running
    ++insertStatements_;
    start.push_back(it->group);
  }
  for (auto& group : start) {
    auto alive = alive_;
    pool_.acquire([this, alive, group](Result<LeasePtr> lease) {
      if (!*alive) return;
      if (!lease) {
        // No connection can be made: everyone waiting hears why now.
        --insertStatements_;
        insertingGroups_.erase(group);
        auto waiting = std::move(inserts_);
        inserts_.clear();
        for (auto& q : waiting) q.cb(lease.error());
        return;
      }
      insertGroup(*lease, group);
    });
  }
}

void Store::insertGroup(LeasePtr lease, std::string groupKey) {
  auto group = std::make_shared<std::deque<QueuedInsert>>();
  // This group's waiting inserts in arrival order: ids keep it.
  for (auto it = inserts_.begin(); it != inserts_.end() && group->size() < options_.maxInsertGroup;) {
    if (it->group == groupKey) {
      group->push_back(std::move(*it));
      it = inserts_.erase(it);
    } else {
      ++it;
    }
  }
  if (group->empty()) {
    --insertStatements_;
    insertingGroups_.erase(groupKey);
    return pumpInserts();
  }
  const NewMessage& first = group->front().m;
  auto alive = alive_;
  auto answer = [this, alive, lease, group, groupKey](Result<PgResult> r) mutable {
    lease.reset();
    if (!*alive) return;
    --insertStatements_;
    insertingGroups_.erase(groupKey);
    pumpInserts();
    if (!r) {
      if (group->size() == 1) return group->front().cb(r.error());
      return insertEach(group);
    }
    auto rows = storedRows(*r);
    if (rows.size() != group->size()) {
      Error e{"message insert returned " + std::to_string(rows.size()) + " rows for " +
              std::to_string(group->size()) + " messages"};
      for (auto& q : *group) q.cb(e);
      return;
    }
    // RETURNING is in id order, and ids were drawn in the group's order.
    for (size_t i = 0; i < rows.size(); ++i) (*group)[i].cb(std::move(rows[i]));
  };
  if (group->size() == 1 && !first.dedupeKey) {
    auto& conn = lease->conn();
    return conn.execute(kInsertOneName, sql::kInsertOneMessage, insertOneParams(first),
                        kInsertOneFormats, std::move(answer));
  }
  InsertColumns c;
  for (auto& q : *group) {
    c.payloads.push_back(q.m.payload);
    c.lanes.push_back(q.m.partitionKey);
    c.keys.push_back(q.m.dedupeKey);
    c.origins.push_back(q.m.originId.value_or(0));
    c.addColumns(q.m.columns);
  }
  bool plain = !anyDedupeKey(c);
  auto params = insertParams(first.interfaceId, first.tier, first.destinationIds, first.relaxed, c,
                             !plain, std::nullopt, std::nullopt);
  auto& conn = lease->conn();
  conn.execute(plain ? kInsertPlainName : kInsertName,
               plain ? sql::kInsertPlainMessages : sql::kInsertMessages, std::move(params),
               kInsertFormats, std::move(answer));
}

void Store::insertEach(std::shared_ptr<std::deque<QueuedInsert>> items) {
  if (items->empty()) return;
  auto q = std::move(items->front());
  items->pop_front();
  auto cb = std::move(q.cb);
  q.cb = [this, items, cb = std::move(cb)](Result<StoredMessage> r) {
    cb(std::move(r));
    insertEach(items);
  };
  insertOne(std::move(q));
}

void Store::insertOne(QueuedInsert q) {
  auto answer = [cb = std::move(q.cb)](Result<PgResult> r) {
    if (!r) return cb(r.error());
    auto rows = storedRows(*r);
    if (rows.size() != 1) return cb(Error{"message insert returned no row"});
    cb(std::move(rows[0]));
  };
  // Not retried: an insert updates nothing, and a failed insert is answered
  // to the sender (AE / 503), who sends again.
  if (!q.m.dedupeKey) {
    static const Statement one{kInsertOneName, sql::kInsertOneMessage};
    return run(one, insertOneParams(q.m), kInsertOneFormats, false, std::move(answer));
  }
  InsertColumns c;
  c.payloads.push_back(std::move(q.m.payload));
  c.lanes.push_back(q.m.partitionKey);
  c.keys.push_back(std::move(q.m.dedupeKey));
  c.origins.push_back(q.m.originId.value_or(0));
  c.addColumns(std::move(q.m.columns));
  static const Statement stmt{kInsertName, sql::kInsertMessages};
  run(stmt,
      insertParams(q.m.interfaceId, q.m.tier, q.m.destinationIds, q.m.relaxed, c,
                   /*keyed=*/true, std::nullopt, std::nullopt),
      kInsertFormats, false, std::move(answer));
}

void Store::insertBatch(NewBatch b, Callback<BatchStored> cb) {
  if (b.items.empty() && !b.state) return cb(BatchStored{});
  InsertColumns c;
  c.payloads.reserve(b.items.size());
  for (auto& it : b.items) {
    c.payloads.push_back(std::move(it.payload));
    c.lanes.push_back(it.partitionKey);
    c.keys.push_back(std::move(it.dedupeKey));
    c.addColumns(std::move(it.columns));
  }
  c.origins.assign(b.items.size(), 0);
  Param stateKey, stateJson;
  if (b.state) {
    stateKey = b.state->key;
    stateJson = b.state->json;
  }
  static const Statement keyed{kInsertBatchName, sql::kInsertBatch};
  static const Statement plain{kInsertPlainBatchName, sql::kInsertPlainBatch};
  bool hasKeys = anyDedupeKey(c);
  const Statement& stmt = hasKeys ? keyed : plain;
  auto params = insertParams(b.interfaceId, b.tier, b.destinationIds, b.relaxed, c, hasKeys,
                             std::move(stateKey), std::move(stateJson));
  auto formats = kInsertFormats;
  run(stmt, std::move(params), std::move(formats), false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    if (r->rows() != 1) return cb(Error{"batch insert answered no counts"});
    cb(BatchStored{r->integer(0, 0), r->integer(0, 1)});
  });
}

void Store::insertRefused(NewMessage m, std::string reason, std::optional<SourceStateWrite> state,
                          Callback<StoredMessage> cb) {
  static const Statement stmt{"ductus_insert_refused_message", sql::kInsertRefusedMessage};
  Param stateKey, stateJson;
  if (state) {
    stateKey = std::move(state->key);
    stateJson = std::move(state->json);
  }
  // The reason is a text column: bytes of the message quoted in it must not
  // make the insert fail.
  std::vector<Param> params{num(m.interfaceId),
                            num(static_cast<int16_t>(m.tier)),
                            num(m.partitionKey),
                            asDatabaseText(reason),
                            std::move(m.payload),
                            std::move(m.columns.type),
                            std::move(m.columns.controlId),
                            std::move(m.columns.keyValue),
                            std::move(m.columns.charset),
                            std::move(stateKey),
                            std::move(stateJson)};
  std::vector<int> formats{kText, kText, kText, kText, kBinary, kText,
                           kText, kText, kText, kText, kText};
  run(stmt, std::move(params), std::move(formats), false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    auto rows = storedRows(*r);
    if (rows.size() != 1) return cb(Error{"message insert returned no row"});
    cb(std::move(rows[0]));
  });
}

// ---- Queue, flush, settle ---------------------------------------------------

void Store::readQueue(int64_t destinationId, std::vector<int32_t> lanes, int64_t afterMessageId,
                      Callback<QueueRead> cb, int64_t maxBytes) {
  static const Statement stmt{"ductus_read_queue", sql::kReadQueue, true};
  // The SQL's LIMIT is kQueueReadRows, written out for the generic plan.
  if (maxBytes <= 0) maxBytes = options_.queueReadBytes;
  std::vector<Param> params{num(destinationId), num(afterMessageId), pb::int4Array(lanes),
                            num(maxBytes)};
  run(stmt, std::move(params), {kText, kText, kBinary, kText}, false,
      [cb](Result<PgResult> r) {
        if (!r) return cb(r.error());
        QueueRead read;
        read.rows.reserve(r->rows());
        int64_t seen = 0;
        for (int i = 0; i < r->rows(); ++i) {
          auto id = pb::readInteger(r->text(i, 0));
          auto tier = pb::readInteger(r->text(i, 1));
          auto lane = pb::readInteger(r->text(i, 3));
          auto attempts = pb::readInteger(r->text(i, 4));
          auto rowsSeen = pb::readInteger(r->text(i, 7));
          for (auto* v : {&id, &tier, &lane, &attempts, &rowsSeen})
            if (!*v) return cb(Error{"queue read: " + v->error().message});
          QueuedDelivery q;
          q.message.id = *id;
          q.message.tier = tierOf(*tier);
          q.message.receivedAt = std::string(r->text(i, 2));  // text's binary form is its text
          q.partitionKey = static_cast<int32_t>(*lane);
          q.attempts = static_cast<int32_t>(*attempts);
          q.payload = std::string(r->text(i, 5));
          if (!r->isNull(i, 6)) {
            auto origin = pb::readInteger(r->text(i, 6));
            if (!origin) return cb(Error{"queue read: " + origin.error().message});
            q.originId = *origin;
          }
          seen = *rowsSeen;
          read.rows.push_back(std::move(q));
        }
        read.more = seen >= kQueueReadRows || static_cast<int64_t>(read.rows.size()) < seen;
        cb(std::move(read));
      });
}

void Store::flushStatuses(int64_t destinationId, std::vector<DeliveryOutcome> outcomes,
                          Callback<std::vector<int64_t>> cb, Settle settles) {
  if (outcomes.empty()) return cb(std::vector<int64_t>{});
  if (outcomes.size() > kFlushRows)
    return cb(Error{"status flush of " + std::to_string(outcomes.size()) +
                    " deliveries: at most " + std::to_string(kFlushRows) + " at a time"});
  std::vector<MessageRef> refs;
  std::vector<int16_t> statuses;
  std::vector<std::optional<std::string>> errors, outputs;
  for (auto& o : outcomes) {
    if (o.status == MessageStatus::Duplicate)
      return cb(Error{"a delivery cannot be marked duplicate (message " + num(o.message.id) + ")"});
    refs.push_back(o.message);
    statuses.push_back(static_cast<int16_t>(o.status));
    // Often a receiver's own words (an ACK's MSA-3, an HTTP body): bytes
    // the text column would refuse must not fail the whole flush.
    if (o.lastError) o.lastError = asDatabaseText(*o.lastError);
    errors.push_back(std::move(o.lastError));
    outputs.push_back(std::move(o.output));
  }
  auto a = refArrays(refs);
  static const Statement flushOnly{"ductus_flush_statuses", sql::kFlushStatuses};
  static const Statement flushSettle{"ductus_flush_settle_only", sql::kFlushSettleOnly};
  const Statement& stmt = settles == Settle::InTheFlush ? flushSettle : flushOnly;
  std::vector<Param> params{num(destinationId),
                            a.ids,
                            a.tiers,
                            a.ats,
                            pb::int2Array(statuses),
                            pb::bytesArray(pb::kText, errors),
                            pb::bytesArray(pb::kBytea, outputs),
                            a.from,
                            a.to,
                            a.tierA,
                            a.tierB,
                            a.tierC};
  run(stmt, std::move(params),
      {kText, kBinary, kBinary, kBinary, kBinary, kBinary, kBinary, kText, kText, kText, kText,
       kText},
      true, [cb](Result<PgResult> r) {
        if (!r) return cb(r.error());
        std::vector<int64_t> ids;
        for (int i = 0; i < r->rows(); ++i) ids.push_back(r->integer(i, 0));
        cb(std::move(ids));
      });
}

void Store::settle(std::vector<MessageRef> messages, Callback<int64_t> cb) {
  settleChunk(std::make_shared<std::vector<MessageRef>>(std::move(messages)),
              std::make_shared<int64_t>(0), std::move(cb));
}

// Settles at most kFlushRows messages per transaction, so a long list (start
// up) does not hold thousands of row locks at once.
void Store::settleChunk(std::shared_ptr<std::vector<MessageRef>> rest,
                        std::shared_ptr<int64_t> changed, Callback<int64_t> cb) {
  if (rest->empty()) return cb(*changed);
  size_t n = std::min(rest->size(), kFlushRows);
  std::vector<MessageRef> chunk(rest->begin(), rest->begin() + n);
  rest->erase(rest->begin(), rest->begin() + n);
  // First, without locks: the messages another destination still has
  // pending are left to the settle after that destination's flush, which
  // sees ours (this read starts after our flush committed: of two
  // destinations finishing a message at once, the settle after the later
  // commit sees both done; supervisor/delivery/settler.h). With 25
  // destinations, every settle locking every message was 25 row locks per
  // message.
  static const Statement pending{"ductus_settle_pending", sql::kSettlePending};
  auto all = refArrays(chunk);
  auto whole = std::make_shared<std::vector<MessageRef>>(std::move(chunk));
  run(pending, {all.ids, all.tierA, all.from, all.to, all.tierB, all.tierC},
      {kBinary, kText, kText, kText, kText, kText}, false,
      [this, rest, changed, cb, whole](Result<PgResult> r) {
        if (!r) return cb(r.error());
        std::set<int64_t> busy;
        for (int i = 0; i < r->rows(); ++i) busy.insert(r->integer(i, 0));
        std::vector<MessageRef> ready;
        for (auto& m : *whole)
          if (!busy.count(m.id)) ready.push_back(m);
        if (ready.empty()) return settleChunk(rest, changed, cb);
        settleLocked(std::move(ready), rest, changed, cb);
      });
}

void Store::settleLocked(std::vector<MessageRef> chunk, std::shared_ptr<std::vector<MessageRef>> rest,
                         std::shared_ptr<int64_t> changed, Callback<int64_t> cb) {
  auto a = std::make_shared<RefArrays>(refArrays(chunk));
  auto count = std::make_shared<int64_t>(0);
  static const Statement lock{"ductus_settle_lock", sql::kSettleLock};
  static const Statement write{"ductus_settle_write", sql::kSettleWrite};
  transaction(
      [a, count](LeasePtr l, Done done) {
        std::vector<int> f{kBinary, kText, kText, kText, kText, kText};
        *count = 0;
        // The lock's own error (a deadlock, say) is the one to retry on;
        // the write behind it would only say "transaction is aborted".
        auto lockError = std::make_shared<std::optional<Error>>();
        l->conn().execute(lock.name, lock.sql,
                          {a->ids, a->tierA, a->from, a->to, a->tierB, a->tierC}, f,
                          [lockError](Result<PgResult> r) {
                            if (!r) *lockError = r.error();
                          });
        // Queued behind the lock statement on the same connection: it runs
        // after the locks are held, with a snapshot of its own.
        l->conn().execute(write.name, write.sql,
                          {a->ids, a->tierA, a->from, a->to, a->tierB, a->tierC}, f,
                          [count, done, lockError](Result<PgResult> r) {
                            if (*lockError) return done(**lockError);
                            if (!r) return done(r.error());
                            *count = r->affected();
                            done({});
                          });
      },
      [this, rest, changed, count, cb](Status s) {
        if (!s.ok()) return cb(s.error());
        *changed += *count;
        settleChunk(rest, changed, cb);
      });
}

// ---- Routes, resend ----------------------------------------------------------

void Store::finishRouted(RoutedBatch b, Callback<std::vector<RoutedMessage>> cb) {
  if (b.items.empty()) return cb(std::vector<RoutedMessage>{});
  std::vector<MessageRef> refs;
  std::vector<std::string> payloads;
  std::vector<int32_t> lanes;
  std::vector<std::optional<std::string>> keys;
  InsertColumns c;
  for (size_t i = 0; i < b.items.size(); ++i) {
    auto& it = b.items[i];
    refs.push_back(it.source);
    payloads.push_back(std::move(it.payload));
    lanes.push_back(it.partitionKey);
    keys.push_back(std::move(it.dedupeKey));
    c.addColumns(i < b.columns.size() ? std::move(b.columns[i]) : MessageColumns{});
  }
  auto a = refArrays(refs);
  static const Statement stmt{"ductus_finish_routed", sql::kFinishRouted};
  std::vector<Param> params{a.ids,
                            a.tiers,
                            a.ats,
                            num(b.sourceDestinationId),
                            pb::bytesArray(pb::kBytea, payloads),
                            pb::int4Array(lanes),
                            pb::bytesArray(pb::kText, keys),
                            num(b.targetInterfaceId),
                            num(static_cast<int16_t>(b.targetTier)),
                            pb::int8Array(b.targetDestinationIds),
                            a.from,
                            a.to,
                            pb::bytesArray(pb::kText, c.types),
                            pb::bytesArray(pb::kText, c.controlIds),
                            pb::bytesArray(pb::kText, c.keyValues),
                            pb::bytesArray(pb::kText, c.charsets)};
  std::vector<int> formats{kBinary, kBinary, kBinary, kText,   kBinary, kBinary,
                           kBinary, kText,   kText,   kBinary, kText,   kText,
                           kBinary, kBinary, kBinary, kBinary};
  run(stmt, std::move(params), std::move(formats), true, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    auto stored = storedRows(*r);
    std::vector<RoutedMessage> out;
    for (size_t i = 0; i < stored.size(); ++i)
      out.push_back(RoutedMessage{r->integer(static_cast<int>(i), 4), std::move(stored[i])});
    cb(std::move(out));
  });
}

void Store::resend(const MessageRef& message, int64_t destinationId, Callback<bool> cb) {
  static const Statement lock{"ductus_lock_message", sql::kLockOneMessage};
  static const Statement back{"ductus_resend_delivery", sql::kResendDelivery};
  static const Statement pend{"ductus_resend_message", sql::kResendMessage};
  std::vector<Param> key{num(message.id), num(static_cast<int16_t>(message.tier)),
                         message.receivedAt};
  auto changed = std::make_shared<bool>(false);
  transaction(
      [key, destinationId, changed](LeasePtr l, Done done) {
        *changed = false;
        auto firstError = std::make_shared<std::optional<Error>>();
        l->conn().execute(lock.name, lock.sql, key, {}, [firstError](Result<PgResult> r) {
          if (!r && !*firstError) *firstError = r.error();
        });
        auto withDest = key;
        withDest.push_back(num(destinationId));
        l->conn().execute(back.name, back.sql, withDest, {},
                          [changed, firstError](Result<PgResult> r) {
                            if (r) *changed = r->affected() > 0;
                            else if (!*firstError) *firstError = r.error();
                          });
        l->conn().execute(pend.name, pend.sql, key, {}, [done, firstError](Result<PgResult> r) {
          if (*firstError) return done(**firstError);
          if (!r) return done(r.error());
          done({});
        });
      },
      [changed, cb](Status s) {
        if (!s.ok()) return cb(s.error());
        cb(*changed);
      });
}

// ---- Start-up repair ---------------------------------------------------------

void Store::runPaged(const Statement& s, std::vector<Param> params, std::vector<int> formats,
                     int64_t pageRows, Callback<int64_t> cb, int64_t doneSoFar) {
  auto alive = alive_;
  run(s, params, formats, true,
      [this, alive, &s, params, formats, pageRows, cb, doneSoFar](Result<PgResult> r) mutable {
        if (!*alive) return;
        if (!r) return cb(r.error());
        int64_t done = doneSoFar + r->affected();
        if (r->affected() < pageRows) return cb(done);
        runPaged(s, std::move(params), std::move(formats), pageRows, std::move(cb), done);
      });
}

void Store::reconcile(int64_t interfaceId, std::vector<int64_t> activeDestinationIds,
                      Callback<ReconcileReport> cb, int64_t pageRows) {
  static const Statement missing{"ductus_reconcile_missing", sql::kReconcileMissing};
  static const Statement removed{"ductus_reconcile_removed", sql::kReconcileRemoved};
  static const Statement finished{"ductus_reconcile_finished", sql::kReconcileFinished};
  pageRows = std::max<int64_t>(pageRows, 1);
  std::vector<Param> p{num(interfaceId), pb::int8Array(activeDestinationIds), num(pageRows)};
  std::vector<int> f{kText, kBinary, kText};
  auto report = std::make_shared<ReconcileReport>();
  runPaged(missing, p, f, pageRows,
           [this, p, f, report, interfaceId, pageRows, cb](Result<int64_t> added) {
             if (!added) return cb(added.error());
             report->deliveriesAdded = *added;
             runPaged(removed, p, f, pageRows,
                      [this, report, interfaceId, pageRows, cb](Result<int64_t> filtered) {
                        if (!filtered) return cb(filtered.error());
                        report->deliveriesFiltered = *filtered;
                        runPaged(finished, {num(interfaceId), num(pageRows)}, {}, pageRows,
                                 [report, cb](Result<int64_t> finished) {
                                   if (!finished) return cb(finished.error());
                                   report->deliveriesFinished = *finished;
                                   cb(*report);
                                 });
                      });
           });
}

void Store::settleFinished(int64_t interfaceId, Callback<int64_t> cb) {
  static const Statement stmt{"ductus_finished_but_pending", sql::kFinishedButPending};
  constexpr int kPage = 1000;
  auto total = std::make_shared<int64_t>(0);
  auto step = std::make_shared<std::function<void()>>();
  auto weakStep = std::weak_ptr<std::function<void()>>(step);
  *step = [this, interfaceId, total, weakStep, cb]() {
    auto keep = weakStep.lock();
    run(stmt, {num(interfaceId), num(kPage)}, {}, false,
        [this, total, keep, cb](Result<PgResult> r) {
          if (!r) return cb(r.error());
          std::vector<MessageRef> refs;
          for (int i = 0; i < r->rows(); ++i)
            refs.push_back(MessageRef{r->integer(i, 0), tierOf(r->integer(i, 1)),
                                      std::string(r->text(i, 2))});
          bool more = r->rows() == kPage;
          settle(std::move(refs), [total, keep, more, cb](Result<int64_t> n) {
            if (!n) return cb(n.error());
            *total += *n;
            // A page that settled nothing would come back the same: stop.
            if (more && *n > 0) return (*keep)();
            cb(*total);
          });
        });
  };
  // The chain keeps itself alive through `keep` until the last page.
  auto start = *step;
  start();
}

void Store::withWaiting(Callback<std::vector<WaitingInterface>> cb) {
  static const Statement stmt{"ductus_with_waiting", sql::kWithWaiting};
  run(stmt, {}, {}, false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    std::vector<WaitingInterface> found;
    for (int i = 0; i < r->rows(); ++i)
      found.push_back(WaitingInterface{r->integer(i, 0), r->text(i, 1) == "t"});
    cb(std::move(found));
  });
}

void Store::waitingCounts(Callback<std::map<int64_t, int64_t>> cb) {
  static const Statement stmt{"ductus_waiting_counts", sql::kWaitingCounts};
  run(stmt, {}, {}, false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    std::map<int64_t, int64_t> counts;
    for (int i = 0; i < r->rows(); ++i) counts[r->integer(i, 0)] = r->integer(i, 1);
    cb(std::move(counts));
  });
}

void Store::quarantinedCounts(Callback<std::map<int64_t, int64_t>> cb) {
  static const Statement stmt{"ductus_quarantined_counts", sql::kQuarantinedCounts};
  run(stmt, {}, {}, false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    std::map<int64_t, int64_t> counts;
    for (int i = 0; i < r->rows(); ++i) counts[r->integer(i, 0)] = r->integer(i, 1);
    cb(std::move(counts));
  });
}

void Store::hasPending(int64_t interfaceId, Callback<bool> cb) {
  static const Statement stmt{"ductus_has_pending", sql::kHasPending};
  run(stmt, {num(interfaceId)}, {}, false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    cb(r->text(0, 0) == "t");
  });
}

// ---- Source state, dedupe keys --------------------------------------------------

void Store::getSourceState(int64_t interfaceId, const std::string& key,
                           Callback<std::optional<std::string>> cb) {
  static const Statement stmt{"ductus_get_source_state", sql::kGetSourceState};
  run(stmt, {num(interfaceId), key}, {}, false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    if (r->rows() == 0) return cb(std::optional<std::string>{});
    cb(std::optional<std::string>(std::string(r->text(0, 0))));
  });
}

void Store::putSourceState(int64_t interfaceId, const std::string& key, const std::string& json,
                           Done cb) {
  static const Statement stmt{"ductus_put_source_state", sql::kPutSourceState};
  run(stmt, {num(interfaceId), key, json}, {}, false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    cb({});
  });
}

void Store::purgeDedupeKeys(int64_t seconds, Callback<int64_t> cb) {
  static const Statement stmt{"ductus_purge_dedupe_keys", sql::kPurgeDedupeKeys};
  run(stmt, {num(seconds)}, {}, false, [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    cb(static_cast<int64_t>(r->affected()));
  });
}

}  // namespace ductus::store
