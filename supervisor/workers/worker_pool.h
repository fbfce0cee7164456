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
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/config/model.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "supervisor/delivery/transformer.h"
#include "supervisor/workers/worker_process.h"

namespace ductus::supervisor {

// What the supervisor fills from the project's config (interface.yaml).
struct FunctionSpec {
  std::string exportName = "transform";
  std::string inputFormat = "hl7v2";  // hl7v2 | json | text | csv | xml | http
  std::string outputFormat = "hl7v2";
  std::string destination;
  std::string charset = "auto";  // auto | utf-8 | iso-8859-1: how the SDK reads the bytes
};

struct InterfaceSpec {
  std::string name;
  std::filesystem::path dir;         // interfaces/<name>
  std::filesystem::path projectLib;  // <project>/lib; may not exist
  std::string entryFile = "transform.js";
  std::vector<FunctionSpec> functions;
  std::chrono::milliseconds timeout{5000};
  bool dedicated = false;
  int workers = 1;  // dedicated only
};

// The module sources of an interface, as the worker receives them:
// "interfaces/<name>/<file>" and "lib/<file>" -> text.
struct ModuleSet {
  std::string entry;
  std::map<std::string, std::string> modules;
};

// Reads every .js/.mjs file of the interface folder and of lib/ (blocking:
// call it at startup or on libuv's thread pool, never on the loop).
// includeTests: also *.test.js (for `ductus test`).
Result<ModuleSet> readInterfaceModules(const InterfaceSpec& spec, bool includeTests = false);

// The interface as its workers run it: the module, the functions
// interface.yaml names (the respond function, or one per destination, in
// destination order) and the input format each is handed. The engine,
// `ductus validate` and `ductus try` all load code through this, so they
// agree on what the code is given.
InterfaceSpec interfaceSpecOf(const config::Project& project, const config::InterfaceConfig& c);

// The load frame for an interface: its modules and one binding per
// function, with the ids the caller chose (parallel to spec.functions).
void fillLoad(proto::LoadInterface::Builder load, uint32_t interfaceId, const InterfaceSpec& spec,
              const ModuleSet& modules, const std::vector<uint32_t>& functionIds);

// A worker's load error names modules as the worker knows them
// ("interfaces/x/transform.js:3:9: ..."); this places it in the project
// folder, as config errors are, so an editor opens the right file.
std::string placeLoadError(const std::filesystem::path& projectRoot, const std::string& error);

// The call's contract lives with delivery, which the pool serves.
using delivery::CallMeta;
using delivery::Outcome;
using delivery::outcomeKindName;

// A request from a script for something outside its worker. The supervisor
// wires Postgres, libcurl and resources.yaml behind this; tests fake it.
struct ServiceCall {
  enum class Kind { DbQuery, DbExecute, Fetch, Env, Secret };
  Kind kind;
  std::string interfaceName;  // who asked (best effort after an await in a shared worker)
  std::string resource;       // db: resources.yaml name
  std::string sql;
  std::string paramsJson;
  std::string url;            // fetch: url, or the path under an api
  std::string api;            // fetch through api(name): its name
  std::string initJson;
  std::string name;           // env / secret
  // What the worker said is left of the asking call's timeout (it settles
  // the call at its deadline whatever the service does): a service should
  // not take longer. Only ever shortens the service's own timeout.
  std::optional<std::chrono::milliseconds> timeLeft;
};

// A worker's SERVICE frame as the call it asks for (interfaceName left for
// the caller, which knows the worker's calls).
ServiceCall serviceCallOf(proto::ServiceRequest::Reader request);

class ServiceHandler {
 public:
  virtual ~ServiceHandler() = default;
  // Answers once, on the loop, with JSON text (or an Error whose message
  // contains "[ductus:transient]" when the call should be retried). May
  // answer after the asking worker is gone: the pool ignores such replies.
  virtual void call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) = 0;
};

// Answers env() from an allowlist directly and passes the rest on.
class AllowlistedEnv : public ServiceHandler {
 public:
  AllowlistedEnv(std::map<std::string, std::string> values, ServiceHandler* next)
      : values_(std::move(values)), next_(next) {}
  void call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) override;

 private:
  std::map<std::string, std::string> values_;
  ServiceHandler* next_;
};

class WorkerPool : public delivery::Transformer {
 public:
  struct Options {
    std::string binary = "/proc/self/exe";
    size_t heapMb = 256;
    int sharedWorkers = 2;
    // How long past a call's timeout the worker may stay silent before it
    // is SIGKILLed. Its own watchdog answers within milliseconds.
    std::chrono::milliseconds grace{2000};
    size_t maxInFlightPerWorker = 256;
    // Consecutive runaway timeouts that stop an interface.
    int timeoutsToStop = 3;
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

  void onInterfaceStopped(StopListener listener) { stopListener_ = std::move(listener); }
  bool isStopped(const std::string& interfaceName) const;
  // Runs a stopped interface again with these modules (its code as fixed
  // on disk): the stop is cleared, its group's workers load it, and
  // `loaded` hears the first verdict, as addInterface's does (a load error
  // stops it again). A worker compiles a module once and keeps it, so the
  // workers that hold the old code are restarted rather than asked to load
  // it again (their other calls are retried, as after any worker exit).
  // Error "not_found": no such interface; "running": it isn't stopped.
  Status restartInterface(const std::string& interfaceName, ModuleSet modules,
                          std::function<void(Status)> loaded = {});

  // Sends shutdown to every worker; `done` once all have exited.
  void shutdown(std::function<void()> done);

  // For tests and `ductus status`.
  std::vector<pid_t> workerPids(const std::string& interfaceName) const;
  size_t restarts() const { return restarts_; }

  // Each worker of each group, shared group first (the API's GET /engine).
  struct WorkerStatus {
    std::string group;
    int slot = 0;
    pid_t pid = 0;                // 0: not running now
    const char* state = "down";   // "starting" (until ready), "running", "down"
    uint64_t restarts = 0;        // starts after the first
    size_t callsInFlight = 0;
  };
  std::vector<WorkerStatus> workers() const;

 private:
  struct Group;
  struct Interface;
  struct Slot;
  struct InFlight {
    uint64_t callId;
    Interface* iface;
    std::chrono::steady_clock::time_point sentAt;
    // timeout + grace: how long the worker may stay silent while it holds
    // this call before it is SIGKILLed.
    std::chrono::milliseconds silence;
    OutcomeCallback done;
    bool culprit = false;
  };
  struct Queued {
    FunctionId fn;
    std::string payload;
    CallMeta meta;
    OutcomeCallback done;
  };

  Slot* pickSlot(Group& g);
  void send(Slot& slot, Interface& iface, FunctionId fn, std::string payload, const CallMeta& meta,
            OutcomeCallback done);
  void drainBacklog(Group& g);
  void startSlot(Slot& slot);
  // Starts the slot's worker again after `delay` (one timer per slot).
  void restartLater(Slot& slot, std::chrono::milliseconds delay);
  void loadInto(Slot& slot, Interface& iface);
  // Answers every `loaded` still waiting in the group with this error.
  void failPendingLoads(Group& g, const std::string& why);
  void onFrame(Slot& slot, proto::FromWorker::Reader msg);
  void onExit(Slot& slot, int64_t status, int signal, const std::string& why);
  void finish(Interface& iface, OutcomeCallback& done, Outcome outcome);
  // quiet: the caller of addInterface hears why (its first load failed)
  // and says it; no log line, no stop listener.
  void stopInterface(Interface& iface, const std::string& why, bool quiet = false);
  void checkDeadlines();

  uv_loop_t* loop_;
  Options options_;
  ServiceHandler& services_;
  std::vector<std::unique_ptr<Group>> groups_;  // [0] is the shared group
  std::vector<std::unique_ptr<Interface>> interfaces_;
  std::unordered_map<FunctionId, std::pair<Interface*, uint32_t>> functions_;  // -> iface, index
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
