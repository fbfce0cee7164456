// Monitor: the engine's watch over its own feeds, so an operator hears of
// a feed that stopped instead of finding it on the console in the morning.
// It owns the parts, each in a file of its own:
//  * ActivityKeeper: last activity kept across restarts, the rates and
//    their learned normal (every 5 s);
//  * HealthJudge: each destination's and interface's health, from one
//    snapshot, for the API and for the alerts;
//  * AlertRound: the alerts' step every 15 s, written with compare-and-set;
//  * Outbox: sending what the steps wrote, at least once;
//  * alerts::Heartbeat: alerts.heartbeat's call of an outside monitor;
//  * every hour, the alerts' history past alerts.keep is deleted.
// Everything runs on the engine's loop; the store's calls are async.
// Started when the engine runs (not while a takeover waits), stopped with
// a last save before the API closes.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/engine_view.h"
#include "common/event_log.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "supervisor/monitor/health.h"

namespace ductus::config {
struct Project;
}
namespace ductus::net {
class CurlMulti;
}
namespace ductus::tls {
class Certificates;
}
namespace ductus::store {
class PgPool;
}
namespace ductus::supervisor::alerts {
class Notifier;
class Heartbeat;
}  // namespace ductus::supervisor::alerts

namespace ductus::supervisor {

class ActivityKeeper;
class TrafficRollup;
class AlertRound;
class Outbox;

class Monitor {
 public:
  struct Deps {
    uv_loop_t* loop = nullptr;
    store::PgPool* pool = nullptr;
    const config::Project* project = nullptr;
    net::CurlMulti* curl = nullptr;
    // The engine's certificates: alerts.smtp.ca names one to verify the
    // mail server with (without it, the system's roots).
    std::shared_ptr<tls::Certificates> tls;
    // The API's list with its counts (EngineView::interfacesWithPending,
    // before health): what every round judges.
    std::function<void(std::function<void(Result<std::vector<api::InterfaceInfo>>)>)> counts;
    std::function<std::vector<api::CertificateInfo>()> certificates;
    std::chrono::system_clock::time_point startedAt;
    std::string host;
    events::Sink* events = nullptr;  // alerts fired and resolved; null: none
  };
  Monitor(Deps deps, std::vector<HealthJudge::Interface> watched);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Loads last activity, then starts the timers (alerts only with alerts:).
  void start(std::function<void(Status)> done);
  // Stops sending and judging and saves last activity once more.
  void stop(std::function<void()> done);
  bool started() const { return started_; }

  // Fills health into the API's list (GET /interfaces, /events, /metrics).
  void annotate(std::vector<api::InterfaceInfo> list,
                std::function<void(std::vector<api::InterfaceInfo>)> done);
  // GET /hotspots.
  // What the traffic rollup counted for the interface and has not
  // written yet (TrafficRollup::unsaved).
  std::vector<store::TrafficRow> unsavedTraffic(int64_t interfaceId) const;
  void hotspots(std::vector<api::InterfaceInfo> list,
                std::function<void(Result<std::vector<api::HotspotInfo>>)> done);

  // For the tests and the bench.
  AlertRound* alerts() const { return round_.get(); }
  alerts::Heartbeat* heartbeat() const { return heartbeat_.get(); }
  Outbox* outbox() const { return outbox_.get(); }

 private:
  Deps deps_;
  std::vector<HealthJudge::Interface> watched_;
  std::unique_ptr<ActivityKeeper> keeper_;
  std::unique_ptr<TrafficRollup> traffic_;  // the charts' minutes
  std::unique_ptr<HealthJudge> judge_;
  std::unique_ptr<alerts::Notifier> notifier_;
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<AlertRound> round_;
  std::unique_ptr<alerts::Heartbeat> heartbeat_;
  UvHandle<uv_timer_t> purgeTimer_;  // alerts' history past alerts.keep, hourly
  bool started_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
