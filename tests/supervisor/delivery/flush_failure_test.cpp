// The delivery loop when the store refuses its writes while reads still
// work (a full disk, a constraint, a trigger): a real store on a database of
// the test's own, with a trigger the test switches on that makes the
// UPDATEs of `deliveries` (the status flush) or of `messages` (the settle)
// fail. What is checked: a failed flush records nothing, so the messages
// are sent again and recorded once writes work; a failed settle is retried
// on its own, never by sending again, until the messages take their
// deliveries' status.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/uv_handle.h"
#include "supervisor/delivery/delivery_loop.h"
#include "supervisor/delivery/transformer.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/run_until.h"

namespace ductus::delivery {
namespace {

using namespace std::chrono_literals;
using store::MessageStatus;

// Answers each call on a later turn of the loop with the payload unchanged,
// as a worker would.
class EchoTransformer : public Transformer {
 public:
  explicit EchoTransformer(uv_loop_t* loop) : timer_(makeTimer(loop, this)) {}
  void invoke(FunctionId, std::string payload, CallMeta, OutcomeCallback done) override {
    ready_.emplace_back(std::move(payload), std::move(done));
    uv_timer_start(
        timer_.get(), [](uv_timer_t* t) { static_cast<EchoTransformer*>(t->data)->answer(); }, 0,
        0);
  }

 private:
  void answer() {
    auto calls = std::move(ready_);
    ready_.clear();
    for (auto& [payload, done] : calls) done(Outcome{Outcome::Kind::Output, payload});
  }
  UvHandle<uv_timer_t> timer_;
  std::deque<std::pair<std::string, OutcomeCallback>> ready_;
};

// Records each send and answers "sent" on a later turn of the loop.
class RecordingSender : public senders::Sender {
 public:
  explicit RecordingSender(uv_loop_t* loop) : timer_(makeTimer(loop, this)) {}
  void send(senders::SendRequest r, SendCallback cb) override {
    sent.push_back(r.payload);
    ready_.push_back(std::move(cb));
    uv_timer_start(
        timer_.get(), [](uv_timer_t* t) { static_cast<RecordingSender*>(t->data)->answer(); }, 0,
        0);
  }
  void close(std::function<void()> done) override { done(); }
  std::vector<std::string> sent;

 private:
  void answer() {
    auto r = std::move(ready_);
    ready_.clear();
    for (auto& cb : r) cb(senders::SendOutcome::sent());
  }
  UvHandle<uv_timer_t> timer_;
  std::vector<SendCallback> ready_;
};

class StoreRefusesWrites : public store::test::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    if (HasFatalFailure()) return;
    // A switch per table; attempts are counted by a sequence, which the
    // failing statement's rollback does not undo.
    for (const char* sql : {
             "CREATE TABLE test_fault (tbl text PRIMARY KEY, fail boolean NOT NULL)",
             "INSERT INTO test_fault VALUES ('deliveries', false), ('messages', false)",
             "CREATE SEQUENCE test_refused",
             "CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
             "IF (SELECT fail FROM test_fault WHERE tbl = TG_ARGV[0]) THEN "
             "PERFORM nextval('test_refused'); "
             "RAISE EXCEPTION 'test: % refuses writes', TG_ARGV[0]; END IF; "
             "RETURN NEW; END $$",
             // On the partitioned tables, so on every partition (whose
             // name is TG_TABLE_NAME; the argument names the parent).
             "CREATE TRIGGER test_refuse BEFORE UPDATE ON deliveries FOR EACH ROW "
             "EXECUTE FUNCTION test_refuse('deliveries')",
             "CREATE TRIGGER test_refuse BEFORE UPDATE ON messages FOR EACH ROW "
             "EXECUTE FUNCTION test_refuse('messages')",
         }) {
      auto r = (*sql_)(sql);
      ASSERT_TRUE(r.ok()) << sql << ": " << r.error().message;
    }
    transformer_ = std::make_unique<EchoTransformer>(&loop_);
    sender_ = std::make_unique<RecordingSender>(&loop_);
    timing_.backoff = Backoff{20ms, 1000ms};
    timing_.wakeWindow = 1ms;
    timing_.safetyNet = 200ms;
  }
  void TearDown() override {
    if (loop_ptr_) {
      bool stopped = false;
      loop_ptr_->stop([&] { stopped = true; });
      EXPECT_TRUE(test::runUntil(&loop_, [&] { return stopped; }, 10s)) << "the loop did not stop";
      loop_ptr_.reset();
    }
    sender_.reset();
    transformer_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);  // the fakes' timers close
    StoreTest::TearDown();
  }

  void refuse(const std::string& table, bool fail) {
    auto r = (*sql_)("UPDATE test_fault SET fail = $1::boolean WHERE tbl = $2",
                     {fail ? "true" : "false", table});
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  int64_t refused() {
    return scalar("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM test_refused");
  }
  // A destination the interface shares with others (in principle): its
  // settle is a statement of its own, after the flush.
  DeliveryLoop& start() {
    DeliveryTarget t;
    t.interfaceName = "test";
    t.destinationName = "a";
    t.destinationId = destA_;
    t.function = 1;
    t.sender = sender_.get();
    t.onlyDestination = false;
    loop_ptr_ = std::make_unique<DeliveryLoop>(&loop_, *store_, *transformer_, t,
                                               std::vector<int32_t>{}, timing_);
    loop_ptr_->wake();
    return *loop_ptr_;
  }
  int64_t stored(const std::string& payload) {
    auto m = insert(message(payload, {destA_}));
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m ? m->ref.id : 0;
  }
  int64_t count(const std::string& sql) { return scalar(sql, {std::to_string(destA_)}); }
  bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 20s) {
    return test::runUntil(&loop_, pred, limit);
  }

  DeliveryTiming timing_;
  std::unique_ptr<EchoTransformer> transformer_;
  std::unique_ptr<RecordingSender> sender_;
  std::unique_ptr<DeliveryLoop> loop_ptr_;
};

constexpr const char* kPendingDeliveries =
    "SELECT count(*) FROM deliveries WHERE destination_id = $1 AND status = 0";
constexpr const char* kSentDeliveries =
    "SELECT count(*) FROM deliveries WHERE destination_id = $1 AND status = 1";
constexpr const char* kSentMessages =
    "SELECT count(*) FROM messages m JOIN deliveries d ON d.message_id = m.id "
    "WHERE d.destination_id = $1 AND m.status = 1";

TEST_F(StoreRefusesWrites, AFailedFlushRecordsNothingSoTheMessagesAreSentAgainAndRecordedLater) {
  refuse("deliveries", true);
  for (const char* p : {"M1", "M2", "M3"}) stored(p);
  start();
  // Sent, the flush refused, read again (still pending), sent again.
  ASSERT_TRUE(waitFor([&] { return sender_->sent.size() >= 6 && refused() >= 2; }));
  EXPECT_EQ(count(kPendingDeliveries), 3);
  EXPECT_EQ(scalar("SELECT max(attempts) FROM deliveries"), 0) << "a refused flush counted";
  // Every round in order.
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(sender_->sent[i], "M" + std::to_string(i % 3 + 1)) << "send " << i;

  refuse("deliveries", false);
  ASSERT_TRUE(waitFor([&] { return count(kSentDeliveries) == 3 && count(kSentMessages) == 3; }))
      << count(kSentDeliveries) << " deliveries, " << count(kSentMessages) << " messages sent";
  // Recorded once: the rows that took the flush count one attempt each.
  EXPECT_EQ(scalar("SELECT max(attempts) FROM deliveries"), 1);
  size_t sends = sender_->sent.size();
  // Nothing is pending any more: the loop's next reads send nothing.
  uint64_t until = uv_now(&loop_) + 3 * timing_.safetyNet.count();
  waitFor([&] { return uv_now(&loop_) >= until; }, 5s);
  EXPECT_EQ(sender_->sent.size(), sends);
}

TEST_F(StoreRefusesWrites, AFailedSettleIsRetriedWithoutSendingAgainUntilItSucceeds) {
  refuse("messages", true);
  for (const char* p : {"M1", "M2", "M3"}) stored(p);
  start();
  // The deliveries are recorded; the messages' settle is refused, and tried
  // again (back-off 20, 40, 80 ms ...).
  ASSERT_TRUE(waitFor([&] { return count(kSentDeliveries) == 3 && refused() >= 3; }))
      << count(kSentDeliveries) << " deliveries sent, " << refused() << " refusals";
  EXPECT_EQ(count(kSentMessages), 0);
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"M1", "M2", "M3"}));

  refuse("messages", false);
  ASSERT_TRUE(waitFor([&] { return count(kSentMessages) == 3; }))
      << count(kSentMessages) << " messages settled after " << refused() << " refusals";
  // Only the settle was retried: each message was sent once.
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"M1", "M2", "M3"}));
  EXPECT_EQ(scalar("SELECT max(attempts) FROM deliveries"), 1);
}

// A flush refused after a full read (50 rows: more are waiting) leaves the
// rows pending. Reading again at once sent the same 50 messages to the
// destination as fast as it took them while the store refused writes but
// still answered reads (a full disk, a statement timeout on the UPDATE):
// ~140,000 sends (2,800 of the first message) in 2 s. Each re-read after a
// refused flush waits a back-off, as a failed read does.
TEST_F(StoreRefusesWrites, AFlushRefusedAfterAFullReadBacksOffBeforeSendingAgain) {
  timing_.safetyNet = 30s;  // the engine's: not what brings the resends
  int backoffs = 0;
  timing_.onBackoff = [&](std::chrono::milliseconds) { ++backoffs; };
  refuse("deliveries", true);
  for (int i = 0; i < 60; ++i) stored("M" + std::to_string(i));
  start();
  ASSERT_TRUE(waitFor([&] { return refused() >= 5; }));
  auto m0 = std::count(sender_->sent.begin(), sender_->sent.end(), "M0");
  // Each send of the first message after the first one follows a back-off.
  EXPECT_LE(m0, backoffs + 1) << sender_->sent.size() << " sends, " << refused()
                              << " refused flushes";
}

}  // namespace
}  // namespace ductus::delivery
