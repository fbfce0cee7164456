// The client half of scripts/bench-store.sh. Runs against a database the
// script made (migrated here), prints "name value" lines the script puts in
// its table next to pgbench's figures:
//
//   bench_store queue  CONNINFO [WAITING [AHEAD [DRAINED]]]
//                                 queue read time (ms, median of 200) with
//                                 1,000 and WAITING (500,000) waiting, and
//                                 1,000 waiting behind AHEAD (1,000,000)
//                                 delivered rows, all on a vacuumed table;
//                                 then DRAINED (100,000) of the WAITING
//                                 delivered and settled as a delivery loop
//                                 does, timing its reads, and the read again
//                                 right after, with no VACUUM in between
//   bench_store insert CONNINFO N SECONDS
//                                 durable single-message inserts (message +
//                                 one delivery + dedupe key, one commit
//                                 each) with N in flight on N connections
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "schema/migrator.h"
#include "schema/store.h"

using namespace ductus;
using namespace ductus::store;

namespace {

template <typename T>
Result<T> await(uv_loop_t* loop, std::function<void(std::function<void(Result<T>)>)> start) {
  std::optional<Result<T>> out;
  start([&](Result<T> r) { out = std::move(r); });
  while (!out && uv_run(loop, UV_RUN_ONCE)) {
  }
  if (!out) return Error{"the loop ran dry"};
  return std::move(*out);
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "bench_store: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}

struct Bench {
  uv_loop_t loop;
  std::unique_ptr<PgConnection> admin;
  std::unique_ptr<Store> store;
  int64_t iface = 0;

  Bench(const std::string& conninfo, size_t pool) {
    uv_loop_init(&loop);
    admin = std::make_unique<PgConnection>(&loop);
    admin->connect(conninfo, [](Status s) {
      if (!s) die("connect: " + s.error().message);
    });
    auto migrations = must(embeddedMigrations(), "migrations");
    Migrator m(*admin, migrations);
    must(await<MigrateReport>(&loop, [&](auto cb) { m.migrate(cb); }), "migrate");
    store = std::make_unique<Store>(&loop, StoreOptions{conninfo, pool});
    must(await<bool>(&loop,
                     [&](auto cb) {
                       store->start([cb](Status s) {
                         if (!s) return cb(s.error());
                         cb(true);
                       });
                     }),
         "start");
    auto parts = must(
        await<PartitionReport>(&loop, [&](auto cb) { store->ensurePartitions({}, cb); }),
        "partitions");
    if (!parts.errors.empty()) die(parts.errors[0]);
    iface = must(await<int64_t>(&loop, [&](auto cb) { store->ensureInterface("bench", cb); }),
                 "interface");
  }

  int64_t destination(const std::string& name) {
    return must(
        await<int64_t>(&loop, [&](auto cb) { store->ensureDestination(iface, name, cb); }),
        "destination");
  }

  void sql(const std::string& text, std::vector<Param> params = {}) {
    must(await<PgResult>(&loop, [&](auto cb) { admin->query(text, std::move(params), cb); }),
         text.c_str());
  }

  // n messages of ~200 bytes in one statement each 100,000, each with one
  // delivery to dest in the given status. Setup only: not durable.
  void fill(int64_t dest, int64_t n, int status) {
    for (int64_t done = 0; done < n; done += 100000) {
      int64_t k = std::min<int64_t>(100000, n - done);
      sql("SET synchronous_commit = off");
      sql(R"(
WITH m AS (
  INSERT INTO messages (tier, interface_id, partition_key, status, payload)
  SELECT 7, $1::int8, g % 8, $3::int2, convert_to(repeat('MSH|^~\&|BENCH|', 13), 'UTF8')
  FROM generate_series(1, $2::int8) g
  ORDER BY g
  RETURNING id, tier, received_at, partition_key)
INSERT INTO deliveries (message_id, destination_id, tier, received_at, partition_key, status)
SELECT id, $4::int8, tier, received_at, partition_key, $3::int2 FROM m)",
          {std::to_string(iface), std::to_string(k), std::to_string(status),
           std::to_string(dest)});
    }
    sql("SET synchronous_commit = on");
  }

  // The lanes a worker with most slots would read: all but one.
  const std::vector<int32_t> lanes{0, 1, 2, 3, 4, 5, 6};

  // One queue read of dest as a delivery loop reads it (from the start of
  // its queue, message id 0); its rows, and its milliseconds in *ms.
  std::vector<QueuedDelivery> read(int64_t dest, double* ms) {
    auto t0 = std::chrono::steady_clock::now();
    auto rows = must(await<QueueRead>(&loop,
                                      [&](auto cb) { store->readQueue(dest, lanes, 0, cb); }),
                     "read")
                    .rows;
    *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return rows;
  }

  // Median milliseconds of 200 queue reads of dest, each returning 50 rows.
  // vacuum: on a table just vacuumed (no dead index entries at all: the
  // best case); without, as the table is (what the delivery loop left).
  double readMs(int64_t dest, bool vacuum = true) {
    if (vacuum) {
      sql("VACUUM ANALYZE messages");
      sql("VACUUM ANALYZE deliveries");
    }
    std::vector<double> ms;
    for (int i = 0; i < 220; ++i) {
      double t = 0;
      auto rows = read(dest, &t);
      if (rows.size() != 50) die("a queue read returned " + std::to_string(rows.size()) + " rows");
      if (i >= 20) ms.push_back(t);
    }
    return median(ms);
  }

  // Delivers and settles n of dest's waiting deliveries the way a delivery
  // loop does (read 50 from the start of the queue, flush their statuses,
  // settle their messages, read again), every delivery a success. Each
  // flush leaves a dead entry in the queue index for every row it marked
  // sent (status leaves the index's predicate, so the update is not HOT),
  // and the next read starts at the queue's front, over those entries,
  // until VACUUM (or autovacuum, after 20% of the table has changed) removes
  // them. Answers the median milliseconds of those reads.
  double drain(int64_t dest, int64_t n) {
    std::vector<double> ms;
    for (int64_t done = 0; done < n;) {
      double t = 0;
      auto rows = read(dest, &t);
      if (rows.empty()) die("the queue ran dry after " + std::to_string(done) + " deliveries");
      ms.push_back(t);
      std::vector<DeliveryOutcome> outcomes;
      std::vector<MessageRef> refs;
      for (auto& row : rows) {
        if (done + static_cast<int64_t>(outcomes.size()) == n) break;
        DeliveryOutcome o;
        o.message = row.message;
        outcomes.push_back(o);
        refs.push_back(row.message);
      }
      done += static_cast<int64_t>(outcomes.size());
      // Separately: "waiting" is one of its interface's two destinations.
      must(await<std::vector<int64_t>>(
               &loop, [&](auto cb) { store->flushStatuses(dest, std::move(outcomes), cb); }),
           "flush");
      must(await<int64_t>(&loop, [&](auto cb) { store->settle(std::move(refs), cb); }), "settle");
    }
    return median(ms);
  }

  // What the statistics say about the deliveries table's dead rows, and
  // whether autovacuum has cleaned it since our last VACUUM.
  std::string deadRows() {
    auto r = must(await<PgResult>(&loop,
                                  [&](auto cb) {
                                    admin->query(
                                        "SELECT coalesce(sum(n_dead_tup), 0)::text, "
                                        "count(*) FILTER (WHERE last_autovacuum > last_vacuum)::text "
                                        "FROM pg_stat_user_tables WHERE relname LIKE 'deliveries%'",
                                        {}, cb);
                                  }),
                  "pg_stat_user_tables");
    return std::string(r.text(0, 0)) + " " + std::string(r.text(0, 1));
  }

  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

int queueBench(const std::string& conninfo, int64_t waitingRows, int64_t ahead,
               int64_t drained) {
  if (waitingRows < 1000 + drained + 1000 || drained < 1)
    die("WAITING must be at least 1,000 + DRAINED + 1,000 (a full read after the drain)");
  Bench b(conninfo, 2);
  int64_t waiting = b.destination("waiting");
  int64_t behind = b.destination("behind");
  // AHEAD delivered rows of "behind" first (lower ids: ahead of its
  // backlog), then the backlogs.
  b.fill(behind, ahead, 1);
  b.fill(behind, 1000, 0);
  b.fill(waiting, 1000, 0);
  std::printf("read_1k_ms %.3f\n", b.readMs(waiting));
  std::fflush(stdout);
  b.fill(waiting, waitingRows - 1000, 0);
  std::printf("read_backlog_ms %.3f\n", b.readMs(waiting));
  std::printf("read_ahead_delivered_ms %.3f\n", b.readMs(behind));
  std::fflush(stdout);
  // The last readMs vacuumed: the dead entries from here on are the drain's.
  std::printf("read_draining_ms %.3f\n", b.drain(waiting, drained));
  std::printf("read_drained_ms %.3f\n", b.readMs(waiting, false));
  std::printf("dead_deliveries_autovacuumed %s\n", b.deadRows().c_str());
  return 0;
}

int insertBench(const std::string& conninfo, int conns, double seconds) {
  Bench b(conninfo, static_cast<size_t>(conns));
  int64_t dest = b.destination("insert-" + std::to_string(conns));
  std::string payload(200, 'x');
  int64_t done = 0, errors = 0, seq = 0;
  auto start = std::chrono::steady_clock::now();
  auto end = start + std::chrono::duration<double>(seconds);
  int inFlight = 0;
  std::function<void()> one = [&]() {
    if (std::chrono::steady_clock::now() >= end) return;
    NewMessage m;
    m.interfaceId = b.iface;
    m.tier = Tier::Week1;
    m.payload = payload;
    m.partitionKey = static_cast<int32_t>(seq % 8);
    m.dedupeKey = "bench-" + std::to_string(conns) + "-" + std::to_string(seq++);
    m.destinationIds = {dest};
    ++inFlight;
    b.store->insert(std::move(m), [&](Result<StoredMessage> r) {
      --inFlight;
      if (r) ++done;
      else if (++errors == 1) std::fprintf(stderr, "insert: %s\n", r.error().message.c_str());
      one();
    });
  };
  for (int i = 0; i < conns; ++i) one();
  while (inFlight > 0 && uv_run(&b.loop, UV_RUN_ONCE)) {
  }
  double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("insert_%d_per_s %.0f\n", conns, done / took);
  if (errors) std::printf("insert_%d_errors %lld\n", conns, static_cast<long long>(errors));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "queue")
    return queueBench(argv[2], argc > 3 ? std::atoll(argv[3]) : 500000,
                      argc > 4 ? std::atoll(argv[4]) : 1000000,
                      argc > 5 ? std::atoll(argv[5]) : 100000);
  if (argc >= 5 && std::string(argv[1]) == "insert")
    return insertBench(argv[2], std::atoi(argv[3]), std::atof(argv[4]));
  std::fprintf(stderr, "usage: bench_store queue CONNINFO [WAITING [AHEAD [DRAINED]]] | insert CONNINFO CONNS SECONDS\n");
  return 2;
}
