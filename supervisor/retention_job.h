// RetentionJob: the engine's retention on its libuv loop. At start it
// settles each interface's tier (schema/retention.h: a shorter one waits
// for `ductus retention confirm`); then, 5 s after the start and every hour,
// one run moves the unfinished messages of expired periods to the held
// area, drops the periods and the held months nothing keeps, purges the
// dedupe keys past their window and counts the held area. Everything is
// async libpq on a connection of its own (and another for GET /retention's
// reads); a run never blocks the loop and never holds a lock intake waits
// for. `ductus retention run` runs the same job once.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/engine_view.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "schema/retention.h"

namespace ductus::supervisor {

struct RetentionInterface {
  int64_t id = 0;
  std::string name;
  store::Tier configured = store::Tier::Week7;
  // dedupe.window; none: the applied tier's days.
  std::optional<std::chrono::milliseconds> dedupeWindow;
  // `quarantined: purge`: its quarantined messages go with their period
  // instead of moving to the held area.
  bool purgeQuarantined = false;
};

struct RetentionRun {
  store::DropReport drops;
  int64_t dedupeKeysPurged = 0;
  std::optional<store::HeldCounts> held;  // counted after the drops
};

// What a run did, one line each: info (dropped, held, purged) or warning.
struct RetentionLine {
  bool warning = false;
  std::string text;
};
std::vector<RetentionLine> describeRun(const RetentionRun& run);

class RetentionJob {
 public:
  RetentionJob(uv_loop_t* loop, std::string conninfo, std::vector<RetentionInterface> interfaces,
               store::RetentionOptions options = {});
  ~RetentionJob();
  RetentionJob(const RetentionJob&) = delete;
  RetentionJob& operator=(const RetentionJob&) = delete;

  // Records each interface's tier and answers the one its new messages go
  // to (by interface id), logging every change and every shortening that
  // waits for a confirmation.
  void applyTiers(std::function<void(Result<std::map<int64_t, store::Tier>>)> cb);
  // Runs after `first`, then every `every`; a run still going when the next
  // is due makes that one wait for the following.
  void start(std::chrono::milliseconds first = std::chrono::seconds(5),
             std::chrono::milliseconds every = std::chrono::hours(1));
  // One run now; its lines are logged unless `log` is false (the CLI
  // prints them itself). Answers when it is over.
  void runOnce(std::function<void(Result<RetentionRun>)> cb, bool log = true);
  void stop();
  bool running() const { return running_; }
  // Each interface's tiers, every partition, the held area and the last
  // run, for GET /retention: read on a connection of its own, beside a
  // run.
  void describe(std::function<void(Result<api::RetentionInfo>)> cb);
  // Hears an interface's applied tier changing under a run (confirmed on
  // the command line or on another engine): the engine switches its intake.
  void setOnApplied(std::function<void(int64_t, store::Tier)> fn) { onApplied_ = std::move(fn); }
  // A shorter tier confirmed through the API: its dedupe window follows
  // (the engine changes its intake).
  void confirmed(int64_t interfaceId, store::Tier tier);
  // The held area as the last run counted it (none before the first).
  const std::optional<store::HeldCounts>& held() const { return held_; }
  // The same for the API, with the messages this job's runs moved there.
  std::optional<api::HeldInfo> heldInfo() const;

 private:
  void scheduled();
  void dedupe(std::shared_ptr<RetentionRun> run,
              std::function<void(Result<RetentionRun>)> cb);

  uv_loop_t* loop_;
  std::vector<RetentionInterface> interfaces_;
  store::Retention retention_;
  std::map<int64_t, store::Tier> applied_;  // once known
  std::optional<api::RetentionRunInfo> lastRun_;
  store::Retention reader_;  // describe()'s connection
  std::optional<store::HeldCounts> held_;
  int64_t movedTotal_ = 0;
  std::function<void(int64_t, store::Tier)> onApplied_;
  UvHandle<uv_timer_t> timer_;
  bool running_ = false;
  bool stopped_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
