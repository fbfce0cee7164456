// HealthJudge: the health of every interface and destination this engine
// runs, judged from one snapshot: the counts the API lists
// (EngineView::interfacesWithPending: waiting and quarantined from the
// store's partial indexes), the oldest waiting message of each destination
// with a backlog (one probe of the queue index each), last activity and
// rates (ActivityKeeper), pauses, the runaway guard's stops and an
// operator's intake stops (and the last start, which deadlines count
// from). The
// judgement itself is common/monitor/diagnosis.h (pure); this file only
// gathers its facts and writes its answer into the API's structs, so
// GET /interfaces, /events, /metrics, ductusctl status and the alerts all
// read the same thing.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/engine_view.h"
#include "common/cron.h"
#include "common/monitor/settings.h"

namespace ductus::config {
struct InterfaceConfig;
}
namespace ductus::store {
class PgPool;
}
namespace ductus::delivery {
struct InterfaceActivity;
}

namespace ductus::supervisor {

class ActivityKeeper;

class HealthJudge {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  struct Interface {
    const config::InterfaceConfig* config = nullptr;
    int64_t interfaceId = 0;
    delivery::InterfaceActivity* activity = nullptr;  // null: no queue (respond mode)
    std::vector<int64_t> destinationIds;              // as activity->destinations lists them
    uint32_t slots = 1;       // delivery loops per destination: lane % slots owns a lane
    uint32_t partitions = 1;  // ordering.partitions: lanes at or past it have no loop
  };
  // What a judgement found, beside what it wrote into the list: each
  // interface's own state (stopped, intake_stopped, late, quiet or ok, without its
  // destinations': those alert on their own) and its reason, by name.
  struct Own {
    monitor::State state = monitor::State::Ok;
    std::string reason;
  };
  struct Judged {
    std::vector<api::InterfaceInfo> interfaces;
    std::map<std::string, Own> own;
  };

  HealthJudge(store::PgPool& pool, const ActivityKeeper& keeper, std::vector<Interface> watched,
              TimePoint startedAt);
  ~HealthJudge() { *alive_ = false; }
  HealthJudge(const HealthJudge&) = delete;
  HealthJudge& operator=(const HealthJudge&) = delete;

  // Probes the oldest waiting message of each destination with a backlog,
  // then judges. `done` runs on the loop; a probe that fails leaves the
  // ages unknown (judged without them) and is logged.
  void annotate(std::vector<api::InterfaceInfo> list, std::function<void(Judged)> done);

  // The judgement with the ages given (destination id -> the oldest
  // waiting message's received_at), at `now`.
  Judged judge(std::vector<api::InterfaceInfo> list, const std::map<int64_t, TimePoint>& oldest,
               TimePoint now) const;

 private:
  struct Watched {
    Interface in;
    std::optional<Cron> activeBy;  // parsed once: active_by: { cron: }
  };
  store::PgPool& pool_;
  const ActivityKeeper& keeper_;
  std::vector<Watched> watched_;
  std::map<std::string, size_t> byName_;
  TimePoint startedAt_;
  // A probe answering after the judge is gone (the engine stopping) calls
  // nothing.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
