// AlertRound: every 15 s, whoever watches, the engine judges its alerts
// from the same snapshot as the API (HealthJudge) and the certificates it
// serves, and takes each stored alert one step (common/monitor/alerts.h:
// fire, escalate, change quietly, reopen, recovering, recover, remind).
// A step that changes something is written with its event and its
// notifications in one transaction, compare-and-set on the alert's rev
// (schema/alert_store.h), so two engines on one database record it once;
// the notifications then wait in the outbox (Outbox) to be sent.
//
// Subjects: each interface (its own state: stopped, intake_stopped, late,
// quiet), each
// destination (paused, stalled, error, behind) and each certificates:
// entry the engine serves (expiring). Alerts are read afresh each round:
// another engine's write is seen at the next one.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/engine_view.h"
#include "common/event_log.h"
#include "common/monitor/alert_state.h"
#include "common/monitor/settings.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "supervisor/monitor/health.h"

namespace ductus::store {
class PgPool;
}

namespace ductus::supervisor {

class AlertRound {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  // The judged snapshot (HealthJudge::annotate after the API's counts).
  using Snapshot = std::function<void(std::function<void(Result<HealthJudge::Judged>)>)>;
  struct Deps {
    uv_loop_t* loop = nullptr;
    store::PgPool* pool = nullptr;
    const monitor::AlertSettings* settings = nullptr;
    Snapshot snapshot;
    std::function<std::vector<api::CertificateInfo>()> certificates;
    TimePoint startedAt;
    std::string host;                 // named in the notifications
    std::function<void()> notified;   // a step wrote notifications: send now
    // Hears each alert this engine fired (or reopened) and resolved; null:
    // none. Written once across engines: only the step that won its
    // compare-and-set is told.
    events::Sink* events = nullptr;
    std::chrono::milliseconds every = std::chrono::seconds(15);
  };
  explicit AlertRound(Deps deps);
  ~AlertRound();
  AlertRound(const AlertRound&) = delete;
  AlertRound& operator=(const AlertRound&) = delete;

  void start();
  // One round now; `done` when every change is written (or failed). A round
  // already running: done at once with false.
  void runOnce(std::function<void(bool)> done);

  // The last round's cost, for the log and the bench.
  struct Cost {
    // From the round's start to its steps taken: the snapshot's queries
    // (counts, oldest probes), the alerts read, every step; the writes of
    // what changed come after.
    std::chrono::microseconds judged{0};
    size_t subjects = 0, changes = 0;
  };
  const Cost& lastCost() const { return cost_; }
  uint64_t rounds() const { return rounds_; }

 private:
  struct Observed {
    monitor::Subject subject;
    monitor::State state = monitor::State::Ok;
    std::string reason;
    std::optional<TimePoint> notAfter;  // a certificate's
  };
  void judged(HealthJudge::Judged j, std::function<void(bool)> done);
  void stepAll(std::vector<Observed> observed, std::vector<monitor::AlertState> stored,
               std::function<void(bool)> done);

  Deps deps_;
  bool running_ = false;
  std::chrono::steady_clock::time_point began_;
  Cost cost_;
  uint64_t rounds_ = 0;
  UvHandle<uv_timer_t> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
