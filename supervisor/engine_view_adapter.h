// EngineViewAdapter: the engine as the API sees it (api/engine_view.h),
// read from the engine's workers, intakes' gates and activity counters on
// the engine's loop. Nothing here blocks: every value is in memory, but
// the pending counts, which the store answers later.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/engine_view.h"
#include "supervisor/delivery/activity.h"

namespace ductus::config {
struct InterfaceConfig;
}
namespace ductus::intake {
class Intake;
}

namespace ductus::supervisor {

class WorkerPool;
class EngineActions;

class EngineViewAdapter : public api::EngineView {
 public:
  // One interface as the engine holds it; intake and activity are null
  // for a respond-mode interface (it has no queue).
  struct Viewed {
    const config::InterfaceConfig* config = nullptr;
    intake::Intake* intake = nullptr;
    const delivery::InterfaceActivity* activity = nullptr;
    // Its functions in the workers, one per destination (tryPayload).
    std::vector<uint32_t> functions;
  };

  // Everything given must outlive the adapter. `waiting` counts the
  // pending deliveries per destination id (Store::waitingCounts), for
  // interfacesWithPending(); without it they are left unset. `wake` wakes
  // an interface's delivery loops by name (Engine::wake for each of its
  // lanes); without it wake() does nothing.
  EngineViewAdapter(std::chrono::system_clock::time_point startedAt,
                    std::function<api::EngineState()> state, const WorkerPool& workers,
                    std::vector<Viewed> interfaces, delivery::WaitingCounts waiting = {},
                    std::function<void(const std::string&)> wake = {});
  ~EngineViewAdapter() override { *alive_ = false; }

  api::EngineState state() const override { return state_(); }
  api::EngineInfo engine() const override;
  void interfaces(std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) override;
  // The counts, then the health when a monitor judges it (setHealth).
  void interfacesWithPending(
      std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) override;
  // The counts alone: what the monitor judges.
  void interfacesWithCounts(std::function<void(Result<std::vector<api::InterfaceInfo>>)> done);
  void hotspots(std::function<void(Result<std::vector<api::HotspotInfo>>)> done) override;
  // Who fills health into the counted list, and who finds hotspots in it
  // (supervisor/monitor/monitor.h); unset: no health, no hotspots.
  using Health = std::function<void(std::vector<api::InterfaceInfo>,
                                    std::function<void(std::vector<api::InterfaceInfo>)>)>;
  using Hotspots =
      std::function<void(std::vector<api::InterfaceInfo>,
                         std::function<void(Result<std::vector<api::HotspotInfo>>)>)>;
  using UnsavedTraffic = std::function<std::vector<store::TrafficRow>(int64_t)>;
  void setUnsavedTraffic(UnsavedTraffic f) { unsavedTraffic_ = std::move(f); }
  std::vector<store::TrafficRow> unsavedTraffic(int64_t interfaceId) const override {
    return unsavedTraffic_ ? unsavedTraffic_(interfaceId) : std::vector<store::TrafficRow>{};
  }
  void setHealth(Health health, Hotspots hotspots) {
    health_ = std::move(health);
    hotspots_ = std::move(hotspots);
  }
  void wake(const std::string& interface) override {
    if (wake_) wake_(interface);
  }
  // Pause, restart and drain (supervisor/engine_actions.h); without them
  // those actions answer unavailable. Must outlive the adapter.
  void setActions(EngineActions* actions) { actions_ = actions; }
  // Where interfacesWithPending() reads the quarantined deliveries per
  // destination id (the store's partial index); unset: not shown.
  void setQuarantinedCounts(delivery::WaitingCounts counts) { quarantined_ = std::move(counts); }
  Status setPaused(const std::string& interface, const std::string& destination,
                   std::optional<api::PauseInfo> pause) override;
  void restartInterface(const std::string& interface, std::function<void(Status)> done) override;
  Status setIntakeStopped(const std::string& interface,
                          std::optional<api::IntakeStopInfo> stop) override;
  const config::InterfaceConfig* interfaceConfig(const std::string& interface) const override;
  Status startDrain(bool stopWhenDrained) override;
  Status stopDrain() override;
  void drainStatus(std::function<void(Result<api::DrainInfo>)> done) override;
  // Retention's view and a confirmed tier (supervisor/retention_job.h);
  // unset: answered unavailable.
  using RetentionRead = std::function<void(std::function<void(Result<api::RetentionInfo>)>)>;
  using RetentionConfirmed = std::function<Status(const std::string&, const std::string&)>;
  void setRetention(RetentionRead read, RetentionConfirmed confirmed) {
    retentionRead_ = std::move(read);
    retentionConfirmed_ = std::move(confirmed);
  }
  void retention(std::function<void(Result<api::RetentionInfo>)> done) override {
    if (!retentionRead_) return done(Error{"retention is not running", ErrorKind::Unavailable});
    retentionRead_(std::move(done));
  }
  Status retentionConfirmed(const std::string& interface, const std::string& tier) override {
    if (!retentionConfirmed_) return Error{"retention is not running", ErrorKind::Unavailable};
    return retentionConfirmed_(interface, tier);
  }
  // Adds what the adapter does not hold to engine() (the ownership: engine
  // id, the other live engines).
  void setEngineExtra(std::function<void(api::EngineInfo&)> fill) { engineExtra_ = std::move(fill); }
  // With the interface's intake: its keys, tier and destinations.
  Result<api::MessageKeysView> readKeys(const std::string& interface,
                                        std::string_view payload) override;
  // intake::checkPayload with the interface's format and max_message_size.
  Result<api::PayloadCheckInfo> checkPayload(const std::string& interface,
                                             std::string_view payload) override;
  // Who runs dry runs (the engine's pool, the one the loops call); unset:
  // tryPayload answers unavailable. Must outlive the adapter.
  void setDryRuns(WorkerPool* pool) { dryRuns_ = pool; }
  void tryPayload(const std::string& interface, std::string payload,
                  std::function<void(Result<std::vector<api::TryOutcomeInfo>>)> done) override;

 private:
  std::chrono::system_clock::time_point startedAt_;
  std::function<api::EngineState()> state_;
  const WorkerPool& workers_;
  std::vector<Viewed> interfaces_;
  delivery::WaitingCounts waiting_;
  delivery::WaitingCounts quarantined_;
  std::function<void(const std::string&)> wake_;
  std::function<void(api::EngineInfo&)> engineExtra_;
  EngineActions* actions_ = nullptr;
  WorkerPool* dryRuns_ = nullptr;
  RetentionRead retentionRead_;
  RetentionConfirmed retentionConfirmed_;
  Health health_;
  Hotspots hotspots_;
  UnsavedTraffic unsavedTraffic_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
