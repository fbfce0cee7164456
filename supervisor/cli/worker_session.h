// WorkerSession: one confined `ductus worker`, the same process the engine
// runs interface code in, on a libuv loop of its own and driven one request
// at a time: for the commands that run interface code outside the engine
// (`ductus validate` loads it, `ductus try` calls it). Blocking: never use
// it on the engine's loop.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/uv_handle.h"
#include "common/config/model.h"
#include "supervisor/delivery/transformer.h"
#include "supervisor/workers/interface_spec.h"
#include "supervisor/workers/service_call.h"
#include "supervisor/workers/worker_process.h"

namespace ductus::supervisor {

using delivery::Outcome;

class WorkerSession : public WorkerProcess::Events {
 public:
  struct Options {
    std::string binary = "/proc/self/exe";
    size_t heapMb = config::kDefaultHeapMb;
  };
  // A script's request for a service during a call: JSON text, or an error
  // the script sees thrown.
  using Services = std::function<Result<std::string>(const ServiceCall&)>;
  using Logs = std::function<void(const std::string& level, const std::string& text)>;

  static Result<std::unique_ptr<WorkerSession>> start(const Options& options);
  // Asks the worker to stop and waits for it (SIGKILL after a few seconds).
  ~WorkerSession() override;
  WorkerSession(const WorkerSession&) = delete;
  WorkerSession& operator=(const WorkerSession&) = delete;

  // Without these, a service request is refused and log lines are dropped.
  void onService(Services services) { services_ = std::move(services); }
  void onLog(Logs logs) { logs_ = std::move(logs); }

  // Loads an interface with the given function ids (parallel to
  // spec.functions; none is fine: the code is still compiled and run). The
  // worker's verdict: its error names the module as the worker knows it
  // ("interfaces/x/transform.js:3:9: SyntaxError: ...").
  Status load(uint32_t interfaceId, const InterfaceSpec& spec, const ModuleSet& modules,
              const std::vector<uint32_t>& functionIds);

  // One call of a loaded function. The worker's watchdog stops a script at
  // `timeout`; this side kills the worker if it stays silent 2 s longer.
  delivery::Outcome invoke(uint32_t functionId, const std::string& payload, const CallMeta& meta,
                           std::chrono::milliseconds timeout);

  // The worker has gone (crashed, killed, or exited after a heap overflow).
  bool exited() const { return !proc_ || proc_->exited(); }

  void onLoaded(WorkerProcess& w, const proto::Loaded& m) override;
  void onOutcome(WorkerProcess& w, const proto::Outcome& m) override;
  void onService(WorkerProcess& w, const proto::ServiceRequest& m) override;
  void onLog(WorkerProcess& w, const proto::Log& m) override;
  void onExit(WorkerProcess& w, int64_t status, int signal, const std::string& why) override;

 private:
  WorkerSession() = default;
  // Runs the loop until `done()` or the worker exits; kills the worker if
  // `limit` passes first. False when the worker exited (exitText_ says how).
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit);

  uv_loop_t loop_{};
  bool loopOpen_ = false;
  std::unique_ptr<WorkerProcess> proc_;
  UvHandle<uv_timer_t> timer_;
  Services services_;
  Logs logs_;
  uint64_t nextCallId_ = 1;
  uint32_t waitingLoad_ = 0;
  std::optional<Status> loaded_;
  uint64_t waitingCall_ = 0;
  std::optional<delivery::Outcome> outcome_;
  std::string exitText_;
};

}  // namespace ductus::supervisor
