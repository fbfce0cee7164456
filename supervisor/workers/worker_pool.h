// WorkerPool: the supervisor's script workers. Interfaces with isolation:
// shared share one group of `sharedWorkers` processes; a dedicated interface
// gets a group of its own. Every worker of a group loads every interface of
// the group, so any of them can take any call; a call goes to the worker
// with the fewest calls in flight, and at most maxInFlightPerWorker are sent
// to one worker (the rest wait in the group's backlog).
//
// Runaway protection, supervisor side: a worker holding a call that says
// nothing for the call's timeout + grace is SIGKILLed (its own watchdog
// should have answered long before). The wait runs from the later of the
// call's send and the worker's last frame, not from the send alone: calls
// queue in a worker behind each other, and a backlog of healthy calls is
// progress, not a runaway. The culprit is reported as a runaway,
// every other call in flight on that worker as transient, and the worker is
// restarted. Three runaway timeouts of an interface in a row, or one heap
// overflow, stop the interface: its calls answer Stopped (the caller leaves
// the message pending) and the stop listener hears why.
//
// Everything runs on the supervisor's libuv loop; callbacks are called on it.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/config/model.h"
#include "common/event_log.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "supervisor/delivery/transformer.h"
#include "supervisor/workers/interface_spec.h"
#include "supervisor/workers/service_call.h"
#include "supervisor/workers/worker_status.h"

namespace ductus::supervisor {

// The call's contract lives with delivery, which the pool serves.
using delivery::Outcome;
using delivery::outcomeKindName;

struct InterfaceState;
struct InFlight;
struct WorkerGroup;
struct WorkerSlot;

class WorkerPool : public delivery::Transformer {
 public:
  struct Options {
    std::string binary = "/proc/self/exe";
    size_t heapMb = config::kDefaultHeapMb;
    int sharedWorkers = 2;
    // How long past a call's timeout the worker may stay silent before it
    // is SIGKILLed. Its own watchdog answers within milliseconds.
    std::chrono::milliseconds grace{2000};
    // How long a new worker may take to say it is ready (V8 started, the
    // process confined). Calls sent to it meanwhile wait: their timeout
    // counts from its `ready`, so a slow start (a loaded machine, ASan) is
    // not mistaken for a runaway script. Past it, the worker is killed and
    // its calls retried in its successor.
    std::chrono::milliseconds startAllowance{30000};
    size_t maxInFlightPerWorker = 256;
    // Consecutive runaway timeouts that stop an interface.
    int timeoutsToStop = 3;
    // What tells a worker that died right after starting (restarted with a
    // growing wait) from one that lived: the tests' crash loops set it.
    std::function<std::chrono::steady_clock::time_point()> clock = std::chrono::steady_clock::now;
    // Hears each runaway (not a dry run's) and each worker restarted
    // (common/event_log.h); null: nobody.
    events::Sink* events = nullptr;
  };
  using StopListener = std::function<void(const std::string& interfaceName, const std::string& why)>;

  WorkerPool(uv_loop_t* loop, Options options, ServiceHandler& services);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Registers an interface and loads it into its group's workers (starting
  // them if needed). `loaded` hears the first worker's verdict, or an error
  // when no worker can be started or one exits before it answers; a load
  // error stops the interface. Function ids follow spec.functions' order.
  Result<std::vector<FunctionId>> addInterface(const InterfaceSpec& spec, ModuleSet modules,
                                               std::function<void(Status)> loaded = {});

  void invoke(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done) override;

  // A dry run (POST /api/v1/interfaces/{name}/try): the call goes to the
  // interface's workers as invoke()'s does, bounded by the same timeout and
  // killed the same way, but its script's services are mocked
  // (mockedAnswer: nothing queried, changed or fetched; env() read as
  // usual) and its outcome does not count toward the stop rule: an
  // operator's trial payload neither stops the interface nor clears a
  // count real messages made. The services are told apart by the call the
  // worker says asked (ScriptHost's current call): a dry run's
  // continuation that awaits a promise another call made could be taken
  // for that call's.
  void dryRun(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done);

  void onInterfaceStopped(StopListener listener) { stopListener_ = std::move(listener); }
  bool isStopped(const std::string& interfaceName) const;
  // Runs a stopped interface again with these modules (its code as fixed
  // on disk): the stop is cleared, its group's workers load it, and
  // `loaded` hears the first verdict, as addInterface's does (a load error
  // stops it again). A worker compiles a module once and keeps it, so the
  // workers that hold the old code are restarted rather than asked to load
  // it again (their other calls are retried, as after any worker exit).
  // ErrorKind::NotFound: no such interface; Conflict: it isn't stopped.
  Status restartInterface(const std::string& interfaceName, ModuleSet modules,
                          std::function<void(Status)> loaded = {});

  // Sends shutdown to every worker; `done` once all have exited.
  void shutdown(std::function<void()> done);

  // For tests and `ductus status`.
  std::vector<pid_t> workerPids(const std::string& interfaceName) const;
  size_t restarts() const { return restarts_; }

  // Each worker of each group, shared group first (the API's GET /engine).
  using WorkerStatus = supervisor::WorkerStatus;
  std::vector<WorkerStatus> workers() const;

 private:
  friend struct WorkerSlot;  // hands the pool its worker's events

  WorkerSlot* pickSlot(WorkerGroup& g);
  void call(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done, bool dryRun);
  void send(WorkerSlot& slot, InterfaceState& iface, FunctionId fn, std::string payload,
            const CallMeta& meta, OutcomeCallback done, bool dryRun);
  void drainBacklog(WorkerGroup& g);
  void startSlot(WorkerSlot& slot);
  // Starts the slot's worker again after `delay` (one timer per slot).
  void restartLater(WorkerSlot& slot, std::chrono::milliseconds delay);
  void loadInto(WorkerSlot& slot, InterfaceState& iface);
  // Answers every `loaded` still waiting in the group with this error.
  void failPendingLoads(WorkerGroup& g, const std::string& why);
  // What a worker says, one handler per message.
  void onLoaded(WorkerSlot& slot, const proto::Loaded& m);
  void onOutcome(WorkerSlot& slot, const proto::Outcome& m);
  void onService(WorkerSlot& slot, const proto::ServiceRequest& m);
  void onLog(WorkerSlot& slot, const proto::Log& m);
  void onExit(WorkerSlot& slot, int64_t status, int signal, const std::string& why);
  void finish(InterfaceState& iface, OutcomeCallback& done, Outcome outcome, bool dryRun);
  // A runaway's event (a delivery's or a respond-mode call's; a dry run's
  // is the operator's own trial, not recorded).
  void noteRunaway(const InFlight& call, const Outcome& outcome);
  // quiet: the caller of addInterface hears why (its first load failed)
  // and says it; no log line, no stop listener.
  void stopInterface(InterfaceState& iface, const std::string& why, bool quiet = false);
  void checkDeadlines();

  uv_loop_t* loop_;
  Options options_;
  ServiceHandler& services_;
  std::vector<std::unique_ptr<WorkerGroup>> groups_;  // [0] is the shared group
  std::vector<std::unique_ptr<InterfaceState>> interfaces_;
  std::unordered_map<FunctionId, std::pair<InterfaceState*, uint32_t>> functions_;  // -> iface, index
  UvHandle<uv_timer_t> deadlineTimer_;
  StopListener stopListener_;
  uint64_t nextCallId_ = 1;
  size_t restarts_ = 0;
  bool shuttingDown_ = false;
  std::function<void()> shutdownDone_;
  // Replies from the service handler arriving after the pool is gone see
  // this expired.
  std::shared_ptr<WorkerPool*> alive_ = std::make_shared<WorkerPool*>(this);
};

}  // namespace ductus::supervisor
