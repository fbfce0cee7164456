// The delivery loop on its own: a real store (a database of the test's own),
// a fake Transformer and a fake Sender that answer when and how each test
// says, and short waits. What is checked: back-off, a failed message
// blocking only its own lanes, rate limits (wait and drop), flush batching,
// and the pipelined transforms delivered strictly in order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/uv_handle.h"
#include "supervisor/delivery/backoff.h"
#include "supervisor/delivery/delivery_loop.h"
#include "supervisor/delivery/transformer.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/run_until.h"

namespace ductus::delivery {
namespace {

using namespace std::chrono_literals;
using store::MessageStatus;

// Answers each call on a later turn of the loop, as a worker would: by
// default with the payload unchanged. A test may hold calls and answer them
// itself, in any order.
class FakeTransformer : public Transformer {
 public:
  struct Call {
    FunctionId fn;
    std::string payload;
    CallMeta meta;
    OutcomeCallback done;
  };
  explicit FakeTransformer(uv_loop_t* loop) : timer_(makeTimer(loop, this)) {}

  void invoke(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done) override {
    ++invoked;
    Call c{fn, std::move(payload), std::move(meta), std::move(done)};
    if (hold) {
      held.push_back(std::move(c));
      return;
    }
    ready_.push_back(std::move(c));
    uv_timer_start(
        timer_.get(),
        [](uv_timer_t* t) { static_cast<FakeTransformer*>(t->data)->answerReady(); }, 0, 0);
  }
  // Answers held call i now.
  void release(size_t i) {
    auto c = std::move(held.at(i));
    c.done(answer(c));
  }

  std::function<Outcome(const Call&)> answer = [](const Call& c) {
    return Outcome{Outcome::Kind::Output, c.payload};
  };
  bool hold = false;
  std::vector<Call> held;
  int invoked = 0;

 private:
  void answerReady() {
    auto calls = std::move(ready_);
    ready_.clear();
    for (auto& c : calls) c.done(answer(c));
  }
  UvHandle<uv_timer_t> timer_;
  std::deque<Call> ready_;
};

// Records what it was asked to send, answers on a later turn of the loop.
class FakeSender : public senders::Sender {
 public:
  explicit FakeSender(uv_loop_t* loop) : loop_(loop), timer_(makeTimer(loop, this)) {}

  void send(senders::SendRequest r, SendCallback cb) override {
    sent.push_back(r.payload);
    streams.push_back(r.stream);
    sentAt.push_back(uv_now(loop_));
    if (hold && hold(r.payload)) {
      held.emplace_back(std::move(r.payload), std::move(cb));
      return;
    }
    ready_.emplace_back(std::move(r.payload), std::move(cb));
    uv_timer_start(
        timer_.get(), [](uv_timer_t* t) { static_cast<FakeSender*>(t->data)->answerReady(); }, 0,
        0);
  }
  void close(std::function<void()> done) override { done(); }
  size_t pipelineDepth() const override { return depth; }

  size_t depth = 1;  // the file sender's is 50
  std::function<senders::SendOutcome(const std::string&)> answer = [](const std::string&) {
    return senders::SendOutcome::sent();
  };
  std::function<bool(const std::string&)> hold;
  std::vector<std::string> sent;
  std::vector<uint64_t> streams;  // each send's SendRequest::stream
  std::vector<uint64_t> sentAt;  // the loop's clock, ms
  std::vector<std::pair<std::string, SendCallback>> held;

 private:
  void answerReady() {
    auto r = std::move(ready_);
    ready_.clear();
    for (auto& [payload, cb] : r) cb(answer(payload));
  }
  uv_loop_t* loop_;
  UvHandle<uv_timer_t> timer_;
  std::vector<std::pair<std::string, SendCallback>> ready_;
};

class DeliveryLoopTest : public store::test::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    transformer_ = std::make_unique<FakeTransformer>(&loop_);
    sender_ = std::make_unique<FakeSender>(&loop_);
    other_ = std::make_unique<FakeSender>(&loop_);
    timing_.backoff = Backoff{20ms, 1000ms};
    timing_.wakeWindow = 1ms;
    timing_.safetyNet = 200ms;
  }
  void TearDown() override {
    for (auto& l : loops_) {
      bool stopped = false;
      l->stop([&] { stopped = true; });
      EXPECT_TRUE(test::runUntil(&loop_, [&] { return stopped; }, 10s)) << "a loop did not stop";
    }
    loops_.clear();
    sender_.reset();
    other_.reset();
    transformer_.reset();
    uv_run(&loop_, UV_RUN_NOWAIT);  // the fakes' timers close
    StoreTest::TearDown();
  }

  DeliveryTarget target(int64_t destination, senders::Sender* sender) {
    DeliveryTarget t;
    t.interfaceName = "test";
    t.destinationName = "d" + std::to_string(destination);
    t.destinationId = destination;
    t.function = 1;
    t.sender = sender;
    return t;
  }
  DeliveryLoop& start(DeliveryTarget t, std::vector<int32_t> lanes = {}) {
    loops_.push_back(std::make_unique<DeliveryLoop>(&loop_, *store_, *transformer_, std::move(t),
                                                    std::move(lanes), timing_));
    loops_.back()->wake();
    return *loops_.back();
  }
  int64_t stored(const std::string& payload, std::vector<int64_t> dests, int32_t lane = 0) {
    auto m = insert(message(payload, std::move(dests), std::nullopt, lane));
    EXPECT_TRUE(m.ok()) << m.error().message;
    return m ? m->ref.id : 0;
  }
  int64_t status(int64_t id, int64_t dest) {
    return scalar("SELECT status FROM deliveries WHERE message_id = $1 AND destination_id = $2",
                  {std::to_string(id), std::to_string(dest)});
  }
  std::string lastError(int64_t id, int64_t dest) {
    return text("SELECT coalesce(last_error, '') FROM deliveries WHERE message_id = $1 AND "
                "destination_id = $2",
                {std::to_string(id), std::to_string(dest)});
  }
  int64_t pending(int64_t dest) {
    return scalar("SELECT count(*) FROM deliveries WHERE destination_id = $1 AND status = 0",
                  {std::to_string(dest)});
  }
  bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds limit = 20s) {
    return test::runUntil(&loop_, pred, limit);
  }

  DeliveryTiming timing_;
  std::unique_ptr<FakeTransformer> transformer_;
  std::unique_ptr<FakeSender> sender_, other_;  // two destinations' receivers
  std::vector<std::unique_ptr<DeliveryLoop>> loops_;
};

TEST(Backoff, DoublesFromTheFirstWaitAndStopsAtTheLongest) {
  Backoff b{1000ms, 60'000ms};
  EXPECT_EQ(b.after(0), 1000ms);
  EXPECT_EQ(b.after(1), 2000ms);
  EXPECT_EQ(b.after(5), 32'000ms);
  EXPECT_EQ(b.after(6), 60'000ms);
  EXPECT_EQ(b.after(1000), 60'000ms);
  EXPECT_EQ(b.after(-3), 1000ms);
  // A worker dying at start: 400 ms after the second quick death, up to 5 s.
  constexpr Backoff restart{100ms, 5000ms};
  static_assert(restart.after(2) == 400ms && restart.after(6) == 5000ms);
}

TEST_F(DeliveryLoopTest, ATransientFailureIsRetriedAfterDoublingWaitsUntilItIsSent) {
  std::vector<std::chrono::milliseconds> waits;
  timing_.onBackoff = [&](std::chrono::milliseconds d) { waits.push_back(d); };
  int failuresLeft = 3;
  sender_->answer = [&](const std::string&) {
    if (failuresLeft-- > 0) return senders::SendOutcome::transient("receiver busy");
    return senders::SendOutcome::sent();
  };
  int64_t id = stored("MSG1", {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 1; }));
  EXPECT_EQ(waits, (std::vector<std::chrono::milliseconds>{20ms, 40ms, 80ms}));
  ASSERT_EQ(sender_->sent.size(), 4u);
  // Each retry came no sooner than its wait, by the loop's own clock.
  for (size_t i = 1; i < sender_->sentAt.size(); ++i)
    EXPECT_GE(sender_->sentAt[i] - sender_->sentAt[i - 1], static_cast<uint64_t>(waits[i - 1].count()))
        << "attempt " << i + 1;
  EXPECT_EQ(loop.counters().retries, 3);
  // Counted when sent, recorded by the flush that follows (within 20 ms, or
  // later on a loaded machine: CI saw the status still pending here).
  EXPECT_TRUE(waitFor([&] { return status(id, destA_) == static_cast<int>(MessageStatus::Sent); }));
  EXPECT_EQ(scalar("SELECT attempts FROM deliveries WHERE message_id = $1 AND destination_id = $2",
                   {std::to_string(id), std::to_string(destA_)}),
            4);  // every send counts, the last one too
}

// GET /hotspots says when a failing head is tried again: the loop tells
// its destination's activity while it backs off, and stops saying it once
// it reads again.
TEST_F(DeliveryLoopTest, AFailureBackingOffSaysWhenItsMessageIsTriedAgain) {
  timing_.backoff = Backoff{1500ms, 1500ms};
  int failuresLeft = 1;
  sender_->answer = [&](const std::string&) {
    if (failuresLeft-- > 0) return senders::SendOutcome::transient("receiver busy");
    return senders::SendOutcome::sent();
  };
  DestinationActivity activity("d", false, destA_);
  auto t = target(destA_, sender_.get());
  t.activity = &activity;
  int64_t id = stored("MSG1", {destA_}, 2);
  auto nowMs = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  int64_t before = nowMs();
  auto& loop = start(std::move(t), {2, 3});
  ASSERT_TRUE(waitFor([&] { return !activity.retryWaits().empty(); }));
  int64_t after = nowMs();
  auto waits = activity.retryWaits();
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0].messageId, id);
  EXPECT_EQ(waits[0].lanes, (std::vector<int32_t>{2, 3}));
  EXPECT_GE(waits[0].atMs, before + 1500);
  EXPECT_LE(waits[0].atMs, after + 1500);
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 1; }));
  EXPECT_TRUE(activity.retryWaits().empty()) << "no retry is due once it was sent";
}

TEST_F(DeliveryLoopTest, RetryMaxAttemptsQuarantinesTheMessageAndTheLaneMovesOn) {
  sender_->answer = [](const std::string& p) {
    return p == "BAD" ? senders::SendOutcome::transient("refused") : senders::SendOutcome::sent();
  };
  int64_t bad = stored("BAD", {destA_});
  int64_t good = stored("GOOD", {destA_});
  auto t = target(destA_, sender_.get());
  t.maxAttempts = 3;
  auto& loop = start(t);
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 1; }));
  // Recorded by the flush after the count.
  ASSERT_TRUE(waitFor([&] { return status(good, destA_) == static_cast<int>(MessageStatus::Sent); }));
  EXPECT_EQ(status(bad, destA_), static_cast<int>(MessageStatus::Quarantined));
  EXPECT_NE(lastError(bad, destA_).find("gave up after 3 attempts: refused"), std::string::npos)
      << lastError(bad, destA_);
  EXPECT_EQ(status(good, destA_), static_cast<int>(MessageStatus::Sent));
  EXPECT_EQ(std::count(sender_->sent.begin(), sender_->sent.end(), "BAD"), 3);
}

TEST_F(DeliveryLoopTest, AFailedMessageBlocksOnlyItsOwnLanesAndOnlyForItsDestination) {
  sender_->answer = [](const std::string& p) {
    return p == "L0-FAILS" ? senders::SendOutcome::transient("down") : senders::SendOutcome::sent();
  };
  FakeSender& other = *other_;
  int64_t fails = stored("L0-FAILS", {destA_, destB_}, 0);
  int64_t behind = stored("L0-BEHIND", {destA_, destB_}, 0);
  int64_t lane1 = stored("L1", {destA_, destB_}, 1);
  // destA's lanes are split between two loops, as a dedicated interface's
  // slots split them; destB has a loop of its own.
  auto& a0 = start(target(destA_, sender_.get()), {0});
  auto& a1 = start(target(destA_, sender_.get()), {1});
  auto& b = start(target(destB_, &other));
  ASSERT_TRUE(waitFor([&] { return a1.counters().sent == 1 && b.counters().sent == 3; }));
  ASSERT_TRUE(waitFor([&] { return a0.counters().retries >= 3; }));
  ASSERT_TRUE(waitFor([&] {
    return status(lane1, destA_) == static_cast<int>(MessageStatus::Sent) &&
           status(behind, destB_) == static_cast<int>(MessageStatus::Sent);
  }));
  EXPECT_EQ(status(fails, destA_), static_cast<int>(MessageStatus::Pending));
  EXPECT_EQ(status(behind, destA_), static_cast<int>(MessageStatus::Pending));
  // Nothing behind the failed message in its lane reached the receiver.
  EXPECT_EQ(std::count(sender_->sent.begin(), sender_->sent.end(), "L0-BEHIND"), 0);
  EXPECT_EQ(other.sent, (std::vector<std::string>{"L0-FAILS", "L0-BEHIND", "L1"}));
  EXPECT_EQ(status(behind, destB_), static_cast<int>(MessageStatus::Sent));
}

TEST_F(DeliveryLoopTest, ARateLimitInDropModeFiltersWhatIsOverIt) {
  auto frozen = senders::RateLimiter::Clock::now();
  timing_.now = [&] { return frozen; };  // no time passes: one token only
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(stored("M" + std::to_string(i), {destA_}));
  auto t = target(destA_, sender_.get());
  senders::RateLimitSettings rl;
  rl.count = 1;
  rl.per = std::chrono::hours(1);
  rl.mode = senders::RateLimitMode::Drop;
  t.rateLimit = rl;
  auto& loop = start(t);
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"M0"}));
  EXPECT_EQ(loop.counters().filtered, 3);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_EQ(status(ids[i], destA_), static_cast<int>(MessageStatus::Filtered));
    EXPECT_EQ(lastError(ids[i], destA_), "over the rate limit");
  }
}

TEST_F(DeliveryLoopTest, ARateLimitInWaitModeSpacesTheSendsAndKeepsTheirOrder) {
  for (int i = 0; i < 4; ++i) stored("M" + std::to_string(i), {destA_});
  auto t = target(destA_, sender_.get());
  senders::RateLimitSettings rl;
  rl.count = 1;
  rl.per = 100ms;
  rl.mode = senders::RateLimitMode::Wait;
  t.rateLimit = rl;
  auto& loop = start(t);
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 4; }));
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"M0", "M1", "M2", "M3"}));
  EXPECT_EQ(loop.counters().filtered, 0);
  // Held back, not dropped: a send per period (the margin is for the two
  // clocks, the limiter's and the loop's, being read at other moments).
  for (size_t i = 1; i < sender_->sentAt.size(); ++i)
    EXPECT_GE(sender_->sentAt[i] - sender_->sentAt[i - 1], 90u) << "send " << i;
}

TEST_F(DeliveryLoopTest, OutcomesAreFlushedAtMostFiftyAtATime) {
  for (int i = 0; i < 120; ++i) stored("M" + std::to_string(i), {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 120; }));
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  EXPECT_LE(loop.counters().largestFlush, 50u);
  EXPECT_GE(loop.counters().flushes, 3);
  ASSERT_EQ(sender_->sent.size(), 120u);
  for (int i = 0; i < 120; ++i) EXPECT_EQ(sender_->sent[i], "M" + std::to_string(i));
}

// Reads cut short by their byte limit: one message a read here.
class SmallQueueReads : public DeliveryLoopTest {
 protected:
  void SetUp() override {
    queueReadBytes_ = 1;
    DeliveryLoopTest::SetUp();
    timing_.safetyNet = 1h;  // only a read that says "more" reads again
  }
};

TEST_F(SmallQueueReads, AReadCutByItsByteLimitIsFollowedByTheNextAtOnce) {
  for (int i = 0; i < 12; ++i) stored("M" + std::to_string(i), {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 12; }))
      << "sent " << loop.counters().sent << " of 12: the loop idled after a cut read";
  for (int i = 0; i < 12; ++i) EXPECT_EQ(sender_->sent[i], "M" + std::to_string(i));
}

TEST_F(DeliveryLoopTest, AFinishedOutcomeIsFlushedWhileASlowSendLaterInTheReadWaits) {
  timing_.flushAfter = 20ms;
  sender_->hold = [](const std::string& p) { return p == "SLOW"; };
  int64_t first = stored("FIRST", {destA_});
  int64_t slow = stored("SLOW", {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return sender_->held.size() == 1; }));
  // The read is not over (SLOW is in flight), yet FIRST's status is stored.
  ASSERT_TRUE(waitFor([&] { return status(first, destA_) == static_cast<int>(MessageStatus::Sent); },
                      5s));
  EXPECT_EQ(status(slow, destA_), static_cast<int>(MessageStatus::Pending));
  auto [payload, cb] = std::move(sender_->held[0]);
  cb(senders::SendOutcome::sent());
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  EXPECT_EQ(loop.counters().sent, 2);
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"FIRST", "SLOW"}));
}

TEST_F(DeliveryLoopTest, EveryTransformOfAReadIsInFlightAtOnceAndOutputsLeaveInOrder) {
  transformer_->hold = true;
  transformer_->answer = [](const FakeTransformer::Call& c) {
    return Outcome{Outcome::Kind::Output, c.payload + "-out"};
  };
  for (int i = 0; i < 10; ++i) stored("M" + std::to_string(i), {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return transformer_->held.size() == 10; }));
  EXPECT_TRUE(sender_->sent.empty());
  // Answered last first: nothing is sent before M0's output is there.
  for (size_t i = 10; i-- > 1;) transformer_->release(i);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(sender_->sent.empty());
  transformer_->release(0);
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 10; }));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(sender_->sent[i], "M" + std::to_string(i) + "-out");
}

// A pipelined sender (the file sender takes 16 at once) is handed the
// outputs after the message in hand while their transforms are done; never
// past one whose transform failed transiently: the files after it would be
// written before it is.
TEST_F(DeliveryLoopTest, APipelinedSenderGetsNothingPastATransientFailureBeforeItsRetry) {
  sender_->depth = 16;
  bool failedOnce = false;
  transformer_->answer = [&](const FakeTransformer::Call& c) {
    if (c.payload == "M3" && !failedOnce) {
      failedOnce = true;
      return Outcome{Outcome::Kind::Transient, "worker died"};
    }
    return Outcome{Outcome::Kind::Output, c.payload};
  };
  std::vector<std::string> expected;
  for (int i = 0; i < 10; ++i) {
    expected.push_back("M" + std::to_string(i));
    stored(expected.back(), {destA_});
  }
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  EXPECT_TRUE(failedOnce);
  EXPECT_EQ(loop.counters().retries, 1);
  // Each once, in order: nothing after M3 left before M3's retry did.
  EXPECT_EQ(sender_->sent, expected);
}

TEST_F(DeliveryLoopTest, EachOutcomeKindEndsTheDeliveryAsItSays) {
  transformer_->answer = [](const FakeTransformer::Call& c) {
    if (c.payload == "F") return Outcome{Outcome::Kind::Filtered, "not for us"};
    if (c.payload == "Q") return Outcome{Outcome::Kind::Quarantine, "no MRN"};
    if (c.payload == "R") return Outcome{Outcome::Kind::RunawayTimeout, ""};
    if (c.payload == "H") return Outcome{Outcome::Kind::RunawayHeap, ""};
    return Outcome{Outcome::Kind::Output, c.payload};
  };
  int64_t f = stored("F", {destA_}), q = stored("Q", {destA_}), r = stored("R", {destA_});
  int64_t h = stored("H", {destA_}), o = stored("O", {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  EXPECT_EQ(status(f, destA_), static_cast<int>(MessageStatus::Filtered));
  EXPECT_EQ(lastError(f, destA_), "not for us");
  EXPECT_EQ(status(q, destA_), static_cast<int>(MessageStatus::Quarantined));
  EXPECT_EQ(lastError(q, destA_), "no MRN");
  EXPECT_EQ(status(r, destA_), static_cast<int>(MessageStatus::Quarantined));
  EXPECT_NE(lastError(r, destA_).find("ran past its timeout"), std::string::npos);
  EXPECT_EQ(status(h, destA_), static_cast<int>(MessageStatus::Quarantined));
  EXPECT_NE(lastError(h, destA_).find("filled its heap"), std::string::npos);
  EXPECT_EQ(status(o, destA_), static_cast<int>(MessageStatus::Sent));
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"O"}));
  EXPECT_EQ(loop.counters().quarantined, 3);
}

TEST_F(DeliveryLoopTest, AStoppedInterfaceLeavesItsMessagesPending) {
  transformer_->answer = [](const FakeTransformer::Call&) {
    return Outcome{Outcome::Kind::Stopped, "three runaways in a row"};
  };
  int64_t id = stored("M", {destA_});
  start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return transformer_->invoked >= 1; }));
  for (int i = 0; i < 5; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(sender_->sent.empty());
  EXPECT_EQ(status(id, destA_), static_cast<int>(MessageStatus::Pending));
  EXPECT_EQ(scalar("SELECT attempts FROM deliveries WHERE message_id = $1", {std::to_string(id)}),
            0);
}

// What the engine logs to stderr as JSON lines while it lives (the
// fields are the JSON format's; a capturing sink would see only the words).
class JsonLogs {
 public:
  JsonLogs() : file_(std::tmpfile()) {
    std::fflush(stderr);
    saved_ = dup(2);
    dup2(fileno(file_), 2);
    setupLogging(LogFormat::Json, spdlog::level::debug);
  }
  ~JsonLogs() {
    restore();
    std::fclose(file_);
  }
  // Every line so far, parsed; stderr is the terminal's again.
  std::vector<nlohmann::json> lines() {
    restore();
    std::rewind(file_);
    std::vector<nlohmann::json> out;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, file_)) out.push_back(nlohmann::json::parse(buf));
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    spdlog::default_logger()->flush();
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
    setupLogging(LogFormat::Text);
  }
  FILE* file_;
  int saved_ = -1;
};

TEST_F(DeliveryLoopTest, EachFinishedMessageIsCountedAndSaidInALineWithItsFieldsAtDebug) {
  transformer_->answer = [](const FakeTransformer::Call& c) {
    if (c.payload == "F") return Outcome{Outcome::Kind::Filtered, "not for us"};
    return Outcome{Outcome::Kind::Output, c.payload};
  };
  bool failedOnce = false;
  sender_->answer = [&](const std::string& p) {
    if (p == "Q") return senders::SendOutcome::permanent("HTTP 404");
    if (p == "T" && !failedOnce) {
      failedOnce = true;
      return senders::SendOutcome::transient("receiver busy");
    }
    return senders::SendOutcome::sent();
  };
  int64_t sent = stored("S", {destA_});
  int64_t filtered = stored("F", {destA_});
  int64_t quarantined = stored("Q", {destA_});
  int64_t retried = stored("T", {destA_});
  InterfaceActivity activity("test");
  auto t = target(destA_, sender_.get());
  t.activity = &activity.addDestination(t.destinationName);
  JsonLogs logs;
  start(t);
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  auto lines = logs.lines();

  const auto& counts = activity.destinations.front();
  EXPECT_EQ(counts.sent.load(), 2);
  EXPECT_EQ(counts.filtered.load(), 1);
  EXPECT_EQ(counts.quarantined.load(), 1);
  EXPECT_EQ(counts.retries.load(), 1);
  // Timed as counted: each outcome's latency, each send (the retried one
  // twice), each call of the function (the retried message's twice).
  EXPECT_EQ(counts.latency.snapshot().count, 4);
  EXPECT_EQ(counts.sendTime.snapshot().count, 4);
  EXPECT_GE(counts.transform.snapshot().count, 5);
  // Last activity, kept by the monitor: every outcome finished something,
  // a sent one was sent, and the last error is the quarantine's (after
  // the retry's "receiver busy", or the retry's if it came last).
  auto nowMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  EXPECT_GT(counts.lastFinished.ms(), nowMs - 60'000);
  EXPECT_GT(counts.lastSent.ms(), nowMs - 60'000);
  EXPECT_GT(counts.lastError.ms(), nowMs - 60'000);
  EXPECT_FALSE(counts.lastErrorText().empty());

  // One line per message and outcome, with the message's own fields.
  auto about = [&](int64_t id, const std::string& outcome) -> nlohmann::json {
    nlohmann::json found;
    int n = 0;
    for (auto& l : lines)
      if (l.value("message", int64_t{0}) == id && l.value("outcome", "") == outcome) {
        found = l;
        ++n;
      }
    EXPECT_EQ(n, 1) << "message " << id << " " << outcome;
    return found;
  };
  std::string dest = "d" + std::to_string(destA_);
  auto s = about(sent, "sent");
  EXPECT_EQ(s["level"], "debug");
  EXPECT_EQ(s["interface"], "test");
  EXPECT_EQ(s["destination"], dest);
  EXPECT_EQ(s["attempts"], 1);
  EXPECT_TRUE(s["elapsed_ms"].is_number()) << s.dump();
  std::string start = "test/" + dest + ": message " + std::to_string(sent) + " sent (attempt 1, ";
  EXPECT_TRUE(s["msg"].get<std::string>().starts_with(start)) << s.dump();
  auto f = about(filtered, "filtered");
  EXPECT_EQ(f["reason"], "not for us");
  auto q = about(quarantined, "quarantined");
  EXPECT_EQ(q["level"], "warning");
  EXPECT_EQ(q["reason"], "HTTP 404");
  EXPECT_EQ(about(retried, "sent")["attempts"], 2);
  // The failed attempt's warning names the message too.
  bool warned = false;
  for (auto& l : lines)
    warned = warned || (l.value("message", int64_t{0}) == retried && l["level"] == "warning" &&
                        l["msg"].get<std::string>().find("failed (attempt 1)") != std::string::npos);
  EXPECT_TRUE(warned);
}

// ---- holds (an operator's pause, a lost ownership lock) ---------------------

TEST_F(DeliveryLoopTest, AHeldLoopReadsNothingWhileMessagesArriveAndDeliversThemInOrderOnRelease) {
  stored("FIRST", {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return loop.counters().sent == 1; }));
  loop.hold(Hold::Paused);
  EXPECT_TRUE(loop.held());
  int invoked = transformer_->invoked;
  std::vector<int64_t> ids;
  for (const char* p : {"M1", "M2", "M3", "M4"}) {
    ids.push_back(stored(p, {destA_}));
    loop.wake();  // as intake wakes it after each commit
  }
  // Longer than the safety net's 200 ms: held, even that read is skipped.
  EXPECT_FALSE(waitFor([&] { return transformer_->invoked > invoked; }, 700ms))
      << "a held loop read its queue";
  EXPECT_EQ(sender_->sent.size(), 1u);
  EXPECT_EQ(pending(destA_), 4);

  loop.release(Hold::Paused);
  EXPECT_FALSE(loop.held());
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"FIRST", "M1", "M2", "M3", "M4"}));
  for (int64_t id : ids) EXPECT_EQ(status(id, destA_), static_cast<int>(MessageStatus::Sent));
}

TEST_F(DeliveryLoopTest, AHoldStopsAfterTheMessageInHandFlushesItAndLeavesTheRestPending) {
  sender_->hold = [](const std::string& p) { return p == "A"; };
  int64_t a = stored("A", {destA_});
  int64_t b = stored("B", {destA_});
  int64_t c = stored("C", {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return sender_->held.size() == 1; }));
  loop.hold(Hold::Paused);
  loop.hold(Hold::Paused);  // idempotent
  // The message in hand is finished and its outcome recorded.
  sender_->held[0].second(senders::SendOutcome::sent());
  ASSERT_TRUE(waitFor([&] { return status(a, destA_) == static_cast<int>(MessageStatus::Sent); }));
  EXPECT_FALSE(waitFor([&] { return sender_->sent.size() > 1; }, 400ms));
  EXPECT_EQ(status(b, destA_), static_cast<int>(MessageStatus::Pending));
  EXPECT_EQ(status(c, destA_), static_cast<int>(MessageStatus::Pending));

  loop.release(Hold::Paused);
  ASSERT_TRUE(waitFor([&] { return status(c, destA_) == static_cast<int>(MessageStatus::Sent); }));
  EXPECT_EQ(sender_->sent, (std::vector<std::string>{"A", "B", "C"}));
}

TEST_F(DeliveryLoopTest, EveryReasonMustBeReleasedBeforeTheLoopReadsAgain) {
  auto& loop = start(target(destA_, sender_.get()));
  loop.hold(Hold::Paused);
  loop.hold(Hold::Ownership);
  int64_t id = stored("M", {destA_});
  loop.wake();
  loop.release(Hold::Paused);
  EXPECT_TRUE(loop.held());
  EXPECT_FALSE(waitFor([&] { return transformer_->invoked > 0; }, 400ms));
  loop.release(Hold::Draining);  // never held for it: changes nothing
  EXPECT_TRUE(loop.held());
  loop.release(Hold::Ownership);
  ASSERT_TRUE(waitFor([&] { return status(id, destA_) == static_cast<int>(MessageStatus::Sent); }));
}

TEST_F(DeliveryLoopTest, AHoldDuringABackOffEndsTheWaitAndReleaseRetriesAtOnce) {
  timing_.backoff = Backoff{60'000ms, 60'000ms};  // a wait no test sits out
  int backoffs = 0;
  timing_.onBackoff = [&](std::chrono::milliseconds) { ++backoffs; };
  bool down = true;
  sender_->answer = [&](const std::string&) {
    return down ? senders::SendOutcome::transient("down") : senders::SendOutcome::sent();
  };
  int64_t id = stored("M", {destA_});
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return backoffs == 1; }));  // waiting out its 60 s
  loop.hold(Hold::Paused);
  down = false;
  loop.release(Hold::Paused);
  ASSERT_TRUE(waitFor([&] { return status(id, destA_) == static_cast<int>(MessageStatus::Sent); },
                      10s));
  EXPECT_EQ(sender_->sent.size(), 2u);
}

TEST_F(DeliveryLoopTest, AHeldLoopStops) {
  auto& loop = start(target(destA_, sender_.get()));
  loop.hold(Hold::Paused);
  stored("M", {destA_});
  loop.wake();
  // TearDown stops every loop and fails if one does not.
  EXPECT_TRUE(sender_->sent.empty());
}

TEST_F(DeliveryLoopTest, AHeldIdleLoopIsParkedWithoutATimerAndReadsAtOnceOnRelease) {
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return loop.phase() == DeliveryLoop::Phase::Idle; }));
  loop.hold(Hold::Paused);
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Parked);
  int64_t id = stored("M", {destA_});
  loop.wake();  // remembered, not acted on
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Parked);
  loop.release(Hold::Paused);
  // No wake window: what waited all along is read now.
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Reading);
  ASSERT_TRUE(waitFor([&] { return status(id, destA_) == static_cast<int>(MessageStatus::Sent); }));
  ASSERT_TRUE(waitFor([&] { return loop.phase() == DeliveryLoop::Phase::Idle; }));
  loop.wake();
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Windowing);
  bool stopped = false;
  loop.stop([&] { stopped = true; });
  ASSERT_TRUE(waitFor([&] { return stopped; }));
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Stopped);
  // Never left.
  loop.wake();
  loop.hold(Hold::Paused);
  loop.release(Hold::Paused);
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Stopped);
  loops_.clear();  // stopped already: TearDown's stop would wait for nothing
}

TEST_F(DeliveryLoopTest, ALoopThatSawItsLanesEmptyReadsOnReleaseOnlyIfWokenMeanwhile) {
  timing_.safetyNet = 1h;
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return loop.phase() == DeliveryLoop::Phase::Idle; }));
  int invoked = transformer_->invoked;
  loop.hold(Hold::Paused);
  int64_t id = stored("M", {destA_});  // stored without a wake
  loop.release(Hold::Paused);
  // Its lanes were seen empty and nothing woke it: no read.
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Idle);
  EXPECT_FALSE(waitFor([&] { return transformer_->invoked > invoked; }, 300ms));
  EXPECT_EQ(pending(destA_), 1);
  // Woken while held: the release reads.
  loop.hold(Hold::Paused);
  loop.wake();
  loop.release(Hold::Paused);
  EXPECT_EQ(loop.phase(), DeliveryLoop::Phase::Reading);
  ASSERT_TRUE(waitFor([&] { return status(id, destA_) == static_cast<int>(MessageStatus::Sent); }));
}

TEST_F(DeliveryLoopTest, ALoopStartedEmptyDoesNotReadWhenItsFirstHoldEnds) {
  // As the engine builds them: held until the pauses are read, those of
  // interfaces with nothing waiting told so.
  loops_.push_back(std::make_unique<DeliveryLoop>(&loop_, *store_, *transformer_,
                                                  target(destA_, sender_.get()),
                                                  std::vector<int32_t>{}, timing_));
  auto& empty = *loops_.back();
  empty.startEmpty();
  empty.hold(Hold::Paused);
  loops_.push_back(std::make_unique<DeliveryLoop>(&loop_, *store_, *transformer_,
                                                  target(destB_, other_.get()),
                                                  std::vector<int32_t>{}, timing_));
  auto& waiting = *loops_.back();
  waiting.hold(Hold::Paused);
  int64_t id = stored("B", {destB_});
  empty.release(Hold::Paused);
  waiting.release(Hold::Paused);
  EXPECT_EQ(empty.phase(), DeliveryLoop::Phase::Idle);
  EXPECT_EQ(waiting.phase(), DeliveryLoop::Phase::Reading);
  ASSERT_TRUE(waitFor([&] { return status(id, destB_) == static_cast<int>(MessageStatus::Sent); }));
  EXPECT_TRUE(sender_->sent.empty());
}

TEST_F(DeliveryLoopTest, WithoutASafetyNetAnIdleLoopReadsOnlyWhenWoken) {
  timing_.safetyNet = 0ms;  // the engine's: its sweep wakes the loops instead
  auto& loop = start(target(destA_, sender_.get()));
  ASSERT_TRUE(waitFor([&] { return loop.phase() == DeliveryLoop::Phase::Idle; }));
  int64_t id = stored("M", {destA_});
  // Longer than the 200 ms net the other tests use.
  EXPECT_FALSE(waitFor([&] { return !sender_->sent.empty(); }, 600ms));
  EXPECT_EQ(status(id, destA_), static_cast<int>(MessageStatus::Pending));
  loop.wake();
  ASSERT_TRUE(waitFor([&] { return status(id, destA_) == static_cast<int>(MessageStatus::Sent); }));
}

TEST_F(DeliveryLoopTest, TheLoopsOfOneDestinationSendOnStreamsOfTheirOwnAtTheSharedSender) {
  sender_->depth = 16;  // pipelined, as the file sender: streams keep order
  for (int i = 0; i < 3; ++i) {
    stored("A" + std::to_string(i), {destA_}, 0);
    stored("B" + std::to_string(i), {destA_}, 1);
  }
  start(target(destA_, sender_.get()), {0});
  start(target(destA_, sender_.get()), {1});
  ASSERT_TRUE(waitFor([&] { return pending(destA_) == 0; }));
  ASSERT_EQ(sender_->streams.size(), 6u);
  std::set<uint64_t> a, b;
  for (size_t i = 0; i < sender_->sent.size(); ++i) {
    EXPECT_NE(sender_->streams[i], 0u);
    (sender_->sent[i][0] == 'A' ? a : b).insert(sender_->streams[i]);
  }
  for (uint64_t s : a) EXPECT_EQ(b.count(s), 0u) << "two loops shared stream " << s;
}

}  // namespace
}  // namespace ductus::delivery
