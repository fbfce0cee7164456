// Everything at once (seed: everything_at_once_without_lock_errors): single
// inserts with colliding dedupe keys, a batch writer with source state,
// three destinations draining (read, flush, settle), partitions being
// created and dedupe keys purged, all on one pool at the same time. No call
// may fail, no deadlock may happen, and every message must be accounted for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <set>

#include "tests/schema/store_fixture.h"

namespace ductus::store::test {
namespace {

class Stress : public StoreTest {
 protected:
  void SetUp() override {
    poolSize_ = 8;
    StoreTest::SetUp();
  }
};

TEST_F(Stress, EverythingAtOnceWithoutLockErrors) {
  constexpr int kSingles = 600, kBatches = 12, kBatchSize = 25, kKeys = 150;
  std::vector<std::string> errors;
  auto fail = [&](const std::string& what, const Error& e) {
    errors.push_back(what + ": " + e.message + " (" + kindName(e.kind) + " " + e.sqlstate + ")");
  };
  int pendingStored = 0, duplicates = 0, writesLeft = kSingles + kBatches;
  std::vector<int64_t> dests{destA_, destB_, destC_};

  // Singles: 8 in flight at a time, keys colliding across them and with
  // the batches.
  int nextSingle = 0;
  std::function<void()> single = [&]() {
    if (nextSingle >= kSingles) return;
    int i = nextSingle++;
    auto m = message("single " + std::to_string(i), dests, "key" + std::to_string(i % kKeys),
                     i % 4);
    m.relaxed = i % 3 == 0;
    store_->insert(m, [&](Result<StoredMessage> r) {
      --writesLeft;
      if (!r) fail("insert", r.error());
      else if (r->status == MessageStatus::Duplicate) ++duplicates;
      else ++pendingStored;
      single();
    });
  };
  // The batch writer: one batch after another, with its source state.
  std::function<void(int)> batch = [&](int n) {
    if (n >= kBatches) return;
    NewBatch b;
    b.interfaceId = iface_;
    b.tier = n % 2 ? Tier::Week3 : Tier::Week1;
    b.destinationIds = dests;
    for (int k = 0; k < kBatchSize; ++k)
      b.items.push_back(BatchItem{"batch " + std::to_string(n) + "/" + std::to_string(k), k % 4,
                                  "key" + std::to_string((n * 37 + k * 11) % (kKeys * 2)), {}});
    b.state = SourceStateWrite{"file:batch", "{\"batch\": " + std::to_string(n) + "}"};
    store_->insertBatch(b, [&, n](Result<BatchStored> r) {
      --writesLeft;
      if (!r) fail("batch", r.error());
      else {
        duplicates += r->duplicates;
        pendingStored += r->messages - r->duplicates;
      }
      batch(n + 1);
    });
  };
  // Three destinations draining: read 50, mark them sent, settle, again.
  int drainersLeft = 3;
  std::function<void(int64_t)> drain = [&](int64_t dest) {
    store_->readQueue(dest, {}, 0, [&, dest](Result<QueueRead> read) {
      auto r = read ? Result<std::vector<QueuedDelivery>>(std::move(read->rows))
                    : Result<std::vector<QueuedDelivery>>(read.error());
      if (!r) {
        fail("read", r.error());
        --drainersLeft;
        return;
      }
      if (r->empty()) {
        if (writesLeft == 0) {
          --drainersLeft;
          return;
        }
        // Nothing yet: look again on the next turn of the loop.
        return drain(dest);
      }
      std::vector<DeliveryOutcome> o;
      std::vector<MessageRef> refs;
      for (auto& d : *r) {
        DeliveryOutcome x;
        x.message = d.message;
        x.status = MessageStatus::Sent;
        o.push_back(x);
        refs.push_back(d.message);
      }
      store_->flushStatuses(dest, o, [&, dest, refs](Result<std::vector<int64_t>> f) {
        if (!f) fail("flush", f.error());
        store_->settle(refs, [&, dest](Result<int64_t> s) {
          if (!s) fail("settle", s.error());
          drain(dest);
        });
      });
    });
  };
  // Partitions created (new days further on, each round) and keys purged.
  int maintenanceLeft = 4;
  std::function<void(int)> maintain = [&](int round) {
    if (round >= 4) return;
    PartitionOptions o;
    o.firstDay = text("SELECT ((now() AT TIME ZONE 'UTC')::date + $1::int)::text",
                      {std::to_string(4 + 3 * round)});
    o.daysAhead = 2;
    store_->ensurePartitions(o, [&, round](Result<PartitionReport> r) {
      --maintenanceLeft;
      if (!r) fail("partitions", r.error());
      else
        for (auto& e : r->errors) errors.push_back("partitions: " + e);
      store_->purgeDedupeKeys(3600, [&, round](Result<int64_t> p) {
        if (!p) fail("purge", p.error());
        maintain(round + 1);
      });
    });
  };

  for (int k = 0; k < 6; ++k) single();
  batch(0);
  for (auto d : dests) drain(d);
  maintain(0);
  while ((drainersLeft > 0 || maintenanceLeft > 0) && uv_run(&loop_, UV_RUN_ONCE)) {
  }

  for (auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(store_->stats().deadlockRetries, 0);
  EXPECT_EQ(store_->stats().serializationRetries, 0);
  int total = kSingles + kBatches * kBatchSize;
  EXPECT_EQ(pendingStored + duplicates, total);
  EXPECT_GT(duplicates, 0);
  // Every message accounted for: stored once, sent, or a duplicate.
  EXPECT_EQ(scalar("SELECT count(*) FROM messages"), total);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE status = 4"), duplicates);
  EXPECT_EQ(scalar("SELECT count(*) FROM messages WHERE status = 1"), pendingStored);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries"), 3 * pendingStored);
  EXPECT_EQ(scalar("SELECT count(*) FROM deliveries WHERE status <> 1"), 0);
  // A key is never pending twice.
  EXPECT_EQ(scalar("SELECT count(*) FROM (SELECT dedupe_key FROM messages WHERE status <> 4 "
                   "GROUP BY dedupe_key HAVING count(*) > 1) d"),
            0);
  EXPECT_EQ(text("SELECT value::text FROM source_state WHERE key = 'file:batch'"),
            "{\"batch\": " + std::to_string(kBatches - 1) + "}");
}

// Keys past the dedupe window are purged while inserts claim the same keys:
// each insert either still finds the old key (a duplicate) or finds it gone
// and claims it anew (stored); none fails, nothing deadlocks, a key is
// claimed anew at most once, and every expired key is gone afterwards.
TEST_F(Stress, ExpiredDedupeKeysArePurgedWhileInsertsClaimThem) {
  constexpr int kOld = 200, kInserts = 600;
  for (int k = 0; k < kOld; ++k)
    ASSERT_TRUE(insert(message("first " + std::to_string(k), {destA_}, "old" + std::to_string(k))));
  ASSERT_TRUE((*sql_)("UPDATE dedupe_keys SET seen_at = now() - interval '2 hours'").ok());

  std::vector<std::string> errors;
  int stored = 0, duplicates = 0, insertsLeft = kInserts, purges = 0;
  int64_t purged = 0;
  int next = 0;
  std::function<void()> single = [&]() {
    if (next >= kInserts) return;
    int i = next++;
    auto m = message("again " + std::to_string(i), {destA_}, "old" + std::to_string(i % kOld));
    store_->insert(m, [&](Result<StoredMessage> r) {
      --insertsLeft;
      if (!r) errors.push_back("insert: " + r.error().message);
      else if (r->status == MessageStatus::Duplicate) ++duplicates;
      else ++stored;
      single();
    });
  };
  std::function<void()> purge = [&]() {
    store_->purgeDedupeKeys(3600, [&](Result<int64_t> p) {
      if (!p) errors.push_back("purge: " + p.error().message);
      else purged += *p;
      ++purges;
      if (insertsLeft > 0 || purges < 2) purge();
    });
  };
  for (int k = 0; k < 7; ++k) single();
  purge();
  while ((insertsLeft > 0 || purges < 2) && uv_run(&loop_, UV_RUN_ONCE)) {
  }
  // What the last purge may have missed while a statement held its row.
  auto last = run<int64_t>([&](auto cb) { store_->purgeDedupeKeys(3600, cb); });
  ASSERT_TRUE(last.ok()) << last.error().message;
  purged += *last;

  for (auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(store_->stats().deadlockRetries, 0);
  EXPECT_EQ(stored + duplicates, kInserts);
  EXPECT_EQ(purged, kOld) << "every expired key purged, once";
  EXPECT_GT(stored, 0) << "no insert came after its key's purge: nothing was tested";
  // A key claimed anew is claimed once: the first message of it (expired)
  // and at most one more.
  EXPECT_EQ(scalar("SELECT count(*) FROM (SELECT dedupe_key FROM messages WHERE status <> 4 "
                   "GROUP BY dedupe_key HAVING count(*) > 2) d"),
            0);
  EXPECT_EQ(scalar("SELECT count(*) FROM dedupe_keys WHERE seen_at < now() - interval '1 hour'"),
            0);
  EXPECT_EQ(scalar("SELECT count(*) FROM dedupe_keys"), stored);
}

}  // namespace
}  // namespace ductus::store::test
