// The schedule source on a clock of the test's own (ScheduleSource::make's
// `now`), over a real PostgreSQL: a cron schedule fires at its next minute
// without the test waiting for a real minute, and a run missed while the
// engine was down fires at once, as one.
#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>

#include "intake/intake.h"
#include "intake/schedule_source.h"
#include "tests/schema/store_fixture.h"

namespace ductus::intake {
namespace {

using namespace std::chrono_literals;
using store::test::StoreTest;
using Clock = ScheduleSource::Clock;

// 2030-01-01T00:00:00Z.
const Clock::time_point kMidnight = Clock::from_time_t(1893456000);

class ScheduleClock : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    IntakeSpec spec;
    spec.name = "tick";
    spec.interfaceId = iface_;
    spec.destinationIds = {destA_};
    spec.keys.format = config::Format::Json;
    spec.onStored = [this](int64_t n, int64_t) { stored_ += n; };
    intake_ = std::make_unique<Intake>(*store_, spec, [](int32_t) {});
  }
  void TearDown() override {
    intake_.reset();
    StoreTest::TearDown();
  }

  // A clock that reads `at` now and then goes on at the real pace.
  static ScheduleSource::Now clockFrom(Clock::time_point at) {
    auto start = std::chrono::steady_clock::now();
    return [at, start] {
      return at + std::chrono::duration_cast<Clock::duration>(std::chrono::steady_clock::now() -
                                                               start);
    };
  }

  // Runs the loop until `count` runs are stored or `limit` (real time) is up.
  bool runUntilStored(int64_t count, std::chrono::milliseconds limit) {
    bool late = false;
    uv_timer_t deadline;
    uv_timer_init(&loop_, &deadline);
    deadline.data = &late;
    uv_timer_start(
        &deadline, [](uv_timer_t* t) { *static_cast<bool*>(t->data) = true; },
        static_cast<uint64_t>(limit.count()), 0);
    while (stored_ < count && !late) uv_run(&loop_, UV_RUN_ONCE);
    uv_close(reinterpret_cast<uv_handle_t*>(&deadline), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);  // the close callback, before `deadline` goes
    return stored_ >= count;
  }

  std::string payloads() {
    return text("SELECT string_agg(convert_from(payload, 'UTF8'), ' ' ORDER BY id) FROM messages");
  }

  std::unique_ptr<Intake> intake_;
  int64_t stored_ = 0;
};

TEST_F(ScheduleClock, ACronScheduleFiresAtItsNextMinuteWithoutARealMinutePassing) {
  config::ScheduleSource cfg;
  cfg.cron = "* * * * *";
  // Half a second before a minute on the source's clock.
  auto source = ScheduleSource::make(&loop_, *intake_, cfg, clockFrom(kMidnight + 59500ms));
  ASSERT_TRUE(source.ok()) << source.error().message;
  auto began = std::chrono::steady_clock::now();
  ASSERT_TRUE(runUntilStored(1, 10s)) << "no run within 10 s";
  EXPECT_LT(std::chrono::steady_clock::now() - began, 10s);
  EXPECT_EQ(payloads(), R"({"due":"2030-01-01T00:01:00Z","previous":null})");
}

TEST_F(ScheduleClock, ARunMissedWhileDownFiresAtOnceAsOne) {
  // The last run was ten minutes ago on the source's clock: nine were missed.
  auto saved = run<bool>([&](auto cb) {
    intake_->saveSourceState(
        "schedule",
        R"({"previous":)" +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                               (kMidnight - 10min).time_since_epoch())
                               .count()) +
            "}",
        [cb](Status s) { s ? cb(true) : cb(s.error()); });
  });
  ASSERT_TRUE(saved.ok()) << saved.error().message;
  config::ScheduleSource cfg;
  cfg.cron = "* * * * *";
  auto source = ScheduleSource::make(&loop_, *intake_, cfg, clockFrom(kMidnight + 30s));
  ASSERT_TRUE(source.ok()) << source.error().message;
  ASSERT_TRUE(runUntilStored(1, 10s)) << "no run within 10 s";
  // One run, due now (00:00:30), not one per missed minute.
  auto due = payloads();
  EXPECT_EQ(due.substr(0, 24), R"({"due":"2030-01-01T00:00)") << due;
  EXPECT_NE(due.find(R"("previous":"2029-12-31T23:50:00Z")"), std::string::npos) << due;
  EXPECT_EQ(scalar("SELECT count(*) FROM messages"), 1);
}

}  // namespace
}  // namespace ductus::intake
