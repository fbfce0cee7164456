// EngineActions: what an operator can do to a running engine through the
// API (api/engine_actions.h), on the engine's loop:
// - pause / resume a destination: its delivery loops are held
//   (DeliveryLoop::hold(Hold::Paused)) and read nothing until resumed. The
//   API persists the pause (schema/destination_pauses.h); at start every
//   loop is held until the pauses are read, then those not paused go on.
// - stop / start an interface's intake: the engine closes its source
//   (Deps::closeIntake: an MLLP listener closes, an HTTP path answers 503,
//   files and schedules are not polled) or opens it again; what it stored
//   is still delivered. The API persists the stop
//   (schema/interface_stops.h); the engine reads the stops before it opens
//   its sources and hands them here (stopsRead) to be shown.
// - restart an interface that runaways stopped: its code is read again from
//   disk (an operator fixed it there), loaded into its workers, and its
//   loops are woken to deliver what waited.
// - drain: every intake gate closed (HTTP answers 503, as while stopping)
//   and every MLLP listener closed (what is in flight is answered, new
//   connections are refused, so senders fail over), systemd told and its
//   stored listening sockets removed; the queues empty out. Drained = no store in flight and
//   nothing pending for this engine's unpaused destinations of running interfaces. With stop, the
//   engine then stops the way SIGTERM stops it. Undrain opens the gates again and listens again on
//   the MLLP listeners' addresses.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/engine_view.h"
#include "common/event_log.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "supervisor/delivery/activity.h"

namespace ductus::config {
struct Project;
struct InterfaceConfig;
}  // namespace ductus::config
namespace ductus::delivery {
class DeliveryLoop;
}
namespace ductus::intake {
class Intake;
}
namespace ductus::store {
class PgPool;
}

namespace ductus::supervisor {

class WorkerPool;
class Systemd;

class EngineActions {
 public:
  // One interface as the engine holds it.
  struct Destination {
    std::string name;
    int64_t id = 0;
    std::vector<delivery::DeliveryLoop*> loops;  // one per slot
  };
  struct Interface {
    const config::InterfaceConfig* config = nullptr;
    intake::Intake* intake = nullptr;  // null: respond mode (no queue)
    std::vector<Destination> destinations;
    std::function<void()> wake;  // wakes every loop of the interface
  };
  // Everything must outlive the actions.
  struct Deps {
    uv_loop_t* loop = nullptr;
    const config::Project* project = nullptr;
    WorkerPool* workers = nullptr;
    store::PgPool* pool = nullptr;  // reads the pauses at start
    Systemd* systemd = nullptr;     // null: nothing is told
    delivery::WaitingCounts waiting;  // pending deliveries per destination id
    // A drain with stop is done: stop the engine (the default: SIGTERM to
    // ourselves, so `ductus run` stops as an operator's signal stops it).
    std::function<void()> stop;
    // A drain closes the MLLP listeners (answered, then closed; new
    // connections refused), so senders fail over instead of hearing AE;
    // its end opens them again on the same addresses. Null: nothing to do.
    std::function<void()> closeListeners;
    std::function<void()> reopenListeners;
    // An operator's stop of an interface's intake and its end, by name
    // (Engine::closeIntake, openIntake). Null: nothing to do.
    std::function<void(const std::string&)> closeIntake;
    std::function<void(const std::string&)> openIntake;
    // Hears each intake stopped and started (common/event_log.h); null:
    // nobody.
    events::Sink* events = nullptr;
  };

  EngineActions(Deps deps, std::vector<Interface> interfaces);
  ~EngineActions();
  EngineActions(const EngineActions&) = delete;
  EngineActions& operator=(const EngineActions&) = delete;

  // At start, before the loops' first read: holds every loop until the
  // persisted pauses are read (retried every 5 s while the read fails),
  // then releases those not paused.
  void loadPauses();

  Status setPaused(const std::string& interface, const std::string& destination,
                   std::optional<api::PauseInfo> pause);
  std::optional<api::PauseInfo> pauseOf(int64_t destinationId) const;

  void restartInterface(const std::string& interface, std::function<void(Status)> done);

  // The stops the engine read before opening its sources (it left those
  // closed), by interface name: shown from now on.
  void stopsRead(std::map<std::string, api::IntakeStopInfo> stops);
  // Stops (stop set) or starts the interface's intake. NotFound: not run
  // here; Conflict: an internal source (routes fill it). Stopping what is
  // stopped only updates what is shown; starting what runs does nothing.
  Status setIntakeStopped(const std::string& interface, std::optional<api::IntakeStopInfo> stop);
  std::optional<api::IntakeStopInfo> intakeStopOf(const std::string& interface) const;

  bool draining() const { return draining_; }
  Status startDrain(bool stopWhenDrained);
  Status stopDrain();
  void drainStatus(std::function<void(Result<api::DrainInfo>)> done);
  // The engine stops: no drain check any more, no action is taken.
  void shutdown();

 private:
  Interface* find(const std::string& name);
  void readPauses();
  void checkDrained();

  Deps deps_;
  std::vector<Interface> interfaces_;
  std::map<int64_t, api::PauseInfo> pauses_;  // by destination id
  std::map<std::string, api::IntakeStopInfo> stops_;  // by interface name
  bool pausesRead_ = false;
  bool draining_ = false;
  bool stopWhenDrained_ = false;
  bool stopRequested_ = false;
  bool shutDown_ = false;
  UvHandle<uv_timer_t> pauseRetry_;
  UvHandle<uv_timer_t> drainCheck_;  // while draining with stop
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
