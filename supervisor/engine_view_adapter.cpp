#include "supervisor/engine_view_adapter.h"

#include "common/config/model.h"
#include "intake/intake.h"
#include "supervisor/delivery/activity.h"
#include "supervisor/workers/worker_pool.h"

namespace ductus::supervisor {

EngineViewAdapter::EngineViewAdapter(std::chrono::system_clock::time_point startedAt,
                                     std::function<api::EngineState()> state,
                                     const WorkerPool& workers, std::vector<Viewed> interfaces)
    : startedAt_(startedAt),
      state_(std::move(state)),
      workers_(workers),
      interfaces_(std::move(interfaces)) {}

api::EngineInfo EngineViewAdapter::engine() const {
  api::EngineInfo e;
  e.startedAt = startedAt_;
  e.state = state_();
  for (auto& w : workers_.workers()) {
    api::WorkerInfo i;
    i.group = w.group;
    i.slot = w.slot;
    i.pid = w.pid;
    i.state = w.state;
    i.restarts = static_cast<int64_t>(w.restarts);
    i.callsInFlight = static_cast<int64_t>(w.callsInFlight);
    e.workers.push_back(std::move(i));
  }
  return e;
}

void EngineViewAdapter::interfaces(
    std::function<void(Result<std::vector<api::InterfaceInfo>>)> done) {
  std::vector<api::InterfaceInfo> out;
  out.reserve(interfaces_.size());
  for (auto& v : interfaces_) {
    api::InterfaceInfo f;
    f.name = v.config->name;
    f.source = config::sourceKind(v.config->source);
    f.state = workers_.isStopped(f.name) ? "stopped" : "running";
    if (v.intake) f.gateOpen = v.intake->gate().open();
    if (auto* a = v.activity) {
      f.received = a->received.load(std::memory_order_relaxed);
      f.duplicates = a->duplicates.load(std::memory_order_relaxed);
      for (auto& d : a->destinations) {
        api::DestinationInfo di;
        di.name = d.name;
        di.route = d.route;
        di.sent = d.sent.load(std::memory_order_relaxed);
        di.filtered = d.filtered.load(std::memory_order_relaxed);
        di.quarantined = d.quarantined.load(std::memory_order_relaxed);
        di.routed = d.routed.load(std::memory_order_relaxed);
        di.retries = d.retries.load(std::memory_order_relaxed);
        f.destinations.push_back(std::move(di));
      }
    }
    out.push_back(std::move(f));
  }
  done(std::move(out));
}

}  // namespace ductus::supervisor
