#include "supervisor/workers/worker_pool.h"

#include <algorithm>
#include <csignal>
#include <deque>
#include <set>
#include <utility>

#include "common/log.h"
#include "proto/contract.h"
#include "proto/frame.h"
#include "proto/worker_exit.h"
#include "supervisor/delivery/backoff.h"
#include "supervisor/workers/call_table.h"
#include "supervisor/workers/interface_state.h"
#include "supervisor/workers/worker_process.h"

namespace ductus::supervisor {
namespace {

// What an invoke frame carries besides the payload and the destination's
// name: the call id, function id, meta and Cap'n Proto's framing.
constexpr size_t kFrameEnvelopeBytes = 4096;

using Clock = std::chrono::steady_clock;

constexpr auto kDeadlineTick = std::chrono::milliseconds(50);
constexpr auto kMaxRestartDelay = std::chrono::milliseconds(5000);
// A worker that dies right after starting, again and again: 400 ms after
// the second quick death, doubling to kMaxRestartDelay.
constexpr delivery::Backoff kRestartBackoff{std::chrono::milliseconds(100), kMaxRestartDelay};

}  // namespace

// ---- the pool's state ---------------------------------------------------------

// One worker process of a group, and the process it runs now (restarted in
// place: the slot stays, the process is replaced).
struct WorkerSlot : WorkerProcess::Events {
  WorkerPool* pool = nullptr;
  WorkerGroup* group = nullptr;
  int index = 0;
  std::unique_ptr<WorkerProcess> proc;
  uint64_t incarnation = 0;
  CallTable calls;
  Clock::time_point startedAt;  // by Options::clock
  Clock::time_point lastHeard;  // the worker's last frame: it is alive and working
  Clock::time_point spawnedAt;  // steady, for the start allowance
  int quickDeaths = 0;
  UvHandle<uv_timer_t> restartTimer;
  std::set<uint32_t> loadedIds;  // interfaces sent to this incarnation
  bool replacing = false;        // killed to load an interface's new code
  std::string killedFor;         // the interface whose call or code had it killed

  void onReady(WorkerProcess&) override { lastHeard = Clock::now(); }
  void onHeard(WorkerProcess&) override { lastHeard = Clock::now(); }
  void onLoaded(WorkerProcess&, const proto::Loaded& m) override { pool->onLoaded(*this, m); }
  void onOutcome(WorkerProcess&, const proto::Outcome& m) override { pool->onOutcome(*this, m); }
  void onService(WorkerProcess&, const proto::ServiceRequest& m) override {
    pool->onService(*this, m);
  }
  void onLog(WorkerProcess&, const proto::Log& m) override { pool->onLog(*this, m); }
  void onExit(WorkerProcess&, int64_t status, int signal, const std::string& why) override {
    pool->onExit(*this, status, signal, why);
  }
};

// The workers that run the same interfaces: the shared group, or one
// dedicated interface's.
struct WorkerGroup {
  struct Queued {
    WorkerPool::FunctionId fn;
    std::string payload;
    CallMeta meta;
    WorkerPool::OutcomeCallback done;
    bool dryRun = false;
  };
  std::string name;  // "shared" or the dedicated interface's name
  std::vector<std::unique_ptr<WorkerSlot>> slots;
  std::vector<InterfaceState*> interfaces;
  std::deque<Queued> backlog;  // calls no worker can take now
};

WorkerPool::WorkerPool(uv_loop_t* loop, Options options, ServiceHandler& services)
    : loop_(loop), options_(std::move(options)), services_(services) {
  auto shared = std::make_unique<WorkerGroup>();
  shared->name = "shared";
  groups_.push_back(std::move(shared));
  deadlineTimer_ = makeTimer(loop_, this);
  uv_timer_start(
      deadlineTimer_.get(),
      [](uv_timer_t* t) {
        if (t->data) static_cast<WorkerPool*>(t->data)->checkDeadlines();
      },
      kDeadlineTick.count(), kDeadlineTick.count());
  // The pool's timer alone must not keep a loop running.
  uv_unref(reinterpret_cast<uv_handle_t*>(deadlineTimer_.get()));
}

WorkerPool::~WorkerPool() {
  *alive_ = nullptr;
  // Slots' WorkerProcess destructors SIGKILL what still runs.
}

Result<std::vector<WorkerPool::FunctionId>> WorkerPool::addInterface(
    const InterfaceSpec& spec, ModuleSet modules, std::function<void(Status)> loaded) {
  for (auto& i : interfaces_)
    if (i->spec.name == spec.name) return Error{"interface " + spec.name + " is already loaded"};
  auto iface = std::make_unique<InterfaceState>();
  iface->spec = spec;
  iface->id = static_cast<uint32_t>(interfaces_.size() + 1);
  iface->loaded = std::move(loaded);
  for (size_t i = 0; i < spec.functions.size(); ++i) {
    FunctionId id = static_cast<FunctionId>(functions_.size() + 1);
    functions_[id] = {iface.get(), static_cast<uint32_t>(i)};
    iface->functions.push_back(id);
  }
  iface->load = loadOf(iface->id, spec, std::move(modules), iface->functions);
  WorkerGroup* g;
  if (spec.dedicated) {
    auto own = std::make_unique<WorkerGroup>();
    own->name = spec.name;
    g = own.get();
    groups_.push_back(std::move(own));
  } else {
    g = groups_[0].get();
  }
  iface->group = g;
  g->interfaces.push_back(iface.get());
  InterfaceState* raw = iface.get();
  interfaces_.push_back(std::move(iface));

  int want = spec.dedicated ? std::max(1, spec.workers) : std::max(1, options_.sharedWorkers);
  for (auto& slot : g->slots)
    if (slot->proc) loadInto(*slot, *raw);
  while (static_cast<int>(g->slots.size()) < want) {
    auto slot = std::make_unique<WorkerSlot>();
    slot->pool = this;
    slot->group = g;
    slot->index = static_cast<int>(g->slots.size());
    WorkerSlot& s = *slot;
    g->slots.push_back(std::move(slot));
    startSlot(s);
  }
  return raw->functions;
}

void WorkerPool::startSlot(WorkerSlot& slot) {
  if (shuttingDown_) return;
  auto proc = WorkerProcess::spawn(loop_, {options_.binary, options_.heapMb}, slot);
  slot.incarnation++;
  slot.startedAt = options_.clock();
  if (!proc) {
    spdlog::error("worker pool {}: cannot start worker {}: {}", slot.group->name, slot.index,
                  proc.error().message);
    slot.quickDeaths++;
    // Whoever waits to hear whether the code loads would wait for ever.
    failPendingLoads(*slot.group, "no worker could be started to load its code: " +
                                      proc.error().message);
  } else {
    slot.proc = std::move(*proc);
    slot.spawnedAt = Clock::now();
    slot.loadedIds.clear();
    slot.killedFor.clear();
    spdlog::debug("worker pool {}: worker {} started as pid {}", slot.group->name, slot.index,
                  slot.proc->pid());
    // A stopped interface stays out of new workers: its code is what
    // broke the last one, or does not load at all.
    for (InterfaceState* i : slot.group->interfaces)
      if (!i->stopped) loadInto(slot, *i);
    drainBacklog(*slot.group);
    return;
  }
  // Try again later.
  restartLater(slot, kMaxRestartDelay);
}

void WorkerPool::restartLater(WorkerSlot& slot, std::chrono::milliseconds delay) {
  if (!slot.restartTimer) slot.restartTimer = makeTimer(loop_, &slot);
  uv_timer_start(
      slot.restartTimer.get(),
      [](uv_timer_t* t) {
        auto* s = static_cast<WorkerSlot*>(t->data);
        if (s) s->pool->startSlot(*s);
      },
      static_cast<uint64_t>(delay.count()), 0);
}

void WorkerPool::loadInto(WorkerSlot& slot, InterfaceState& iface) {
  slot.proc->send(iface.load);
  slot.loadedIds.insert(iface.id);
}

void WorkerPool::failPendingLoads(WorkerGroup& g, const std::string& why) {
  for (InterfaceState* i : g.interfaces) {
    if (auto cb = std::move(i->loaded)) {
      i->loaded = nullptr;
      cb(Error{i->spec.name + ": " + why});
    }
  }
}

WorkerSlot* WorkerPool::pickSlot(WorkerGroup& g) {
  WorkerSlot* best = nullptr;
  for (auto& s : g.slots) {
    if (!s->proc || s->proc->exited() || s->proc->killing() ||
        s->calls.size() >= options_.maxInFlightPerWorker)
      continue;
    if (!best || s->calls.size() < best->calls.size()) best = s.get();
  }
  return best;
}

void WorkerPool::invoke(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done) {
  call(fn, std::move(payload), std::move(meta), std::move(done), false);
}

void WorkerPool::dryRun(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done) {
  call(fn, std::move(payload), std::move(meta), std::move(done), true);
}

void WorkerPool::call(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done,
                      bool dryRun) {
  auto it = functions_.find(fn);
  if (it == functions_.end()) {
    done({Outcome::Kind::Transient, proto::transientText("unknown function " + std::to_string(fn))});
    return;
  }
  InterfaceState& iface = *it->second.first;
  if (iface.stopped) {
    done({Outcome::Kind::Stopped, iface.stopReason});
    return;
  }
  WorkerGroup& g = *iface.group;
  WorkerSlot* slot = g.backlog.empty() ? pickSlot(g) : nullptr;
  if (!slot) {
    g.backlog.push_back({fn, std::move(payload), std::move(meta), std::move(done), dryRun});
    return;
  }
  send(*slot, iface, fn, std::move(payload), meta, std::move(done), dryRun);
}

void WorkerPool::send(WorkerSlot& slot, InterfaceState& iface, FunctionId fn, std::string payload,
                      const CallMeta& meta, OutcomeCallback done, bool dryRun) {
  // A frame past the worker's limit would make the worker refuse it and
  // die, and the call would be retried forever: it is the message's fault
  // (a respond-mode body escaped into JSON, a route's large output), for a
  // person to see.
  size_t frameBytes = payload.size() + meta.destination.size() + kFrameEnvelopeBytes;
  if (frameBytes > proto::FrameLimits{}.maxMessageBytes) {
    done({Outcome::Kind::Quarantine,
          "the message is " + std::to_string(payload.size()) +
              " bytes; a call to a worker carries at most " +
              std::to_string(proto::FrameLimits{}.maxMessageBytes - kFrameEnvelopeBytes)});
    return;
  }
  uint64_t callId = nextCallId_++;
  slot.calls.add(InFlight{
      callId, &iface, Clock::now(),
      std::chrono::duration_cast<std::chrono::milliseconds>(iface.spec.timeout + options_.grace),
      std::move(done), false, dryRun, meta.messageId, meta.destination});
  slot.proc->send(proto::Invoke{callId, fn, payload, meta});
}

void WorkerPool::drainBacklog(WorkerGroup& g) {
  while (!g.backlog.empty()) {
    WorkerGroup::Queued& q = g.backlog.front();
    auto it = functions_.find(q.fn);
    InterfaceState& iface = *it->second.first;
    if (iface.stopped) {
      auto done = std::move(q.done);
      g.backlog.pop_front();
      done({Outcome::Kind::Stopped, iface.stopReason});
      continue;
    }
    WorkerSlot* slot = pickSlot(g);
    if (!slot) return;
    WorkerGroup::Queued item = std::move(q);
    g.backlog.pop_front();
    send(*slot, iface, item.fn, std::move(item.payload), item.meta, std::move(item.done),
         item.dryRun);
  }
}

void WorkerPool::finish(InterfaceState& iface, OutcomeCallback& done, Outcome outcome,
                        bool dryRun) {
  if (!dryRun)
    if (auto why = iface.judge(outcome.kind, options_.timeoutsToStop)) stopInterface(iface, *why);
  if (done) done(std::move(outcome));
}

void WorkerPool::noteRunaway(const InFlight& call, const Outcome& outcome) {
  if (!options_.events || call.dryRun) return;
  if (outcome.kind != Outcome::Kind::RunawayTimeout && outcome.kind != Outcome::Kind::RunawayHeap)
    return;
  options_.events->record({events::Kind::Runaway, call.iface->spec.name, call.destination,
                           call.messageId, outcome.data});
}

void WorkerPool::stopInterface(InterfaceState& iface, const std::string& why, bool quiet) {
  if (iface.stopped) return;
  iface.stopped = true;
  iface.stopReason = "interface " + iface.spec.name + " is stopped: " + why;
  if (!quiet) {
    spdlog::error("{} (its messages stay pending until the code is fixed and the interface "
                  "restarted: POST /api/v1/interfaces/NAME/restart)",
                  iface.stopReason);
    if (stopListener_) stopListener_(iface.spec.name, why);
  }
  drainBacklog(*iface.group);  // answers its queued calls Stopped
}

Status WorkerPool::restartInterface(const std::string& name, ModuleSet modules,
                                   std::function<void(Status)> loaded) {
  InterfaceState* iface = nullptr;
  for (auto& i : interfaces_)
    if (i->spec.name == name) iface = i.get();
  if (!iface) return Error{"no interface " + name, ErrorKind::NotFound};
  if (!iface->stopped) return Error{"interface " + name + " is running", ErrorKind::Conflict};
  if (shuttingDown_) return Error{"the workers are shutting down", ErrorKind::Unavailable};
  iface->load = loadOf(iface->id, iface->spec, std::move(modules), iface->functions);
  iface->stopped = false;
  iface->stopReason.clear();
  iface->consecutiveTimeouts = 0;
  iface->loaded = std::move(loaded);
  spdlog::info("interface {}: restarting with its code as it is on disk now", name);
  for (auto& slot : iface->group->slots) {
    // A worker not running now loads it when it starts again; one on its
    // way out (the last runaway's) is not a verdict on the new code.
    if (!slot->proc || slot->proc->exited()) continue;
    if (slot->proc->killing()) {
      slot->replacing = true;
      continue;
    }
    if (slot->loadedIds.count(iface->id)) {
      slot->replacing = true;
      slot->killedFor = name;
      slot->proc->kill("restarting it to load interface " + name + "'s new code");
    } else {
      loadInto(*slot, *iface);
    }
  }
  return {};
}

bool WorkerPool::isStopped(const std::string& name) const {
  for (auto& i : interfaces_)
    if (i->spec.name == name) return i->stopped;
  return false;
}

std::vector<pid_t> WorkerPool::workerPids(const std::string& name) const {
  std::vector<pid_t> out;
  for (auto& i : interfaces_) {
    if (i->spec.name != name) continue;
    for (auto& s : i->group->slots)
      if (s->proc && !s->proc->exited()) out.push_back(s->proc->pid());
  }
  return out;
}

std::vector<WorkerPool::WorkerStatus> WorkerPool::workers() const {
  std::vector<WorkerStatus> out;
  for (auto& g : groups_)
    for (auto& s : g->slots) {
      WorkerStatus w;
      w.group = g->name;
      w.slot = s->index;
      if (s->proc && !s->proc->exited()) {
        w.pid = s->proc->pid();
        w.state = s->proc->ready() ? "running" : "starting";
      }
      w.restarts = s->incarnation > 0 ? s->incarnation - 1 : 0;
      w.callsInFlight = s->calls.size();
      out.push_back(std::move(w));
    }
  return out;
}

// ---- what a worker says ---------------------------------------------------------

void WorkerPool::onLoaded(WorkerSlot& slot, const proto::Loaded& m) {
  InterfaceState* iface = nullptr;
  for (auto& i : interfaces_)
    if (i->id == m.interfaceId) iface = i.get();
  // A worker speaks only for the interfaces of its own group: one that
  // names another (a script that escaped V8 could try, to stop an
  // interface it cannot reach) is not a worker of ours any more.
  if (!iface || iface->group != slot.group) {
    if (slot.proc)
      slot.proc->kill("it reported loading interface " + std::to_string(m.interfaceId) +
                      ", which is not of its group");
    return;
  }
  Status result;
  if (m.error) result = Error{*m.error};
  if (!result) {
    // Whoever waits for the first verdict says it (the engine refuses
    // to start); a later one, from a restarted worker, is logged here.
    bool heard = static_cast<bool>(iface->loaded);
    if (!heard)
      spdlog::error("interface {} does not load: {}", iface->spec.name, result.error().message);
    stopInterface(*iface, "its code does not load: " + result.error().message, /*quiet=*/heard);
  }
  if (auto cb = std::move(iface->loaded)) {
    iface->loaded = nullptr;
    cb(result);
  }
}

void WorkerPool::onOutcome(WorkerSlot& slot, const proto::Outcome& m) {
  // The frame was decoded whole before the call leaves the table: a
  // malformed one kills the worker, and the call is answered with the
  // others of the dead worker, never left waiting.
  auto call = slot.calls.take(m.callId);
  if (!call) return;  // settled already (worker killed meanwhile)
  std::string data(m.data);
  Outcome out{Outcome::Kind::Output, {}};
  switch (m.kind) {
    case proto::OutcomeKind::Output: out = {Outcome::Kind::Output, std::move(data)}; break;
    case proto::OutcomeKind::Filtered: out = {Outcome::Kind::Filtered, std::move(data)}; break;
    case proto::OutcomeKind::Quarantine: out = {Outcome::Kind::Quarantine, std::move(data)}; break;
    case proto::OutcomeKind::Transient: out = {Outcome::Kind::Transient, std::move(data)}; break;
    case proto::OutcomeKind::RunawayHeap:
      out = {Outcome::Kind::RunawayHeap,
             "the script used more memory than the heap limit allows (isolates.heap_mb)"};
      break;
    case proto::OutcomeKind::RunawayTimeout:
      out = {Outcome::Kind::RunawayTimeout,
             "the script ran past its timeout of " +
                 std::to_string(call->iface->spec.timeout.count()) + " ms and was stopped"};
      break;
    default:
      // A kind this build does not know: the worker is not ours to trust.
      out = {Outcome::Kind::Quarantine, "the worker answered an outcome of unknown kind " +
                                            std::to_string(static_cast<int>(m.kind))};
      break;
  }
  WorkerGroup& g = *slot.group;
  bool runaway = out.kind == Outcome::Kind::RunawayTimeout;
  std::string culprit = call->iface->spec.name;
  noteRunaway(*call, out);
  finish(*call->iface, call->done, std::move(out), call->dryRun);
  if (runaway && slot.proc) {
    slot.killedFor = culprit;
    // The isolate survived the terminated script, but its module state
    // may be half-changed: the worker is restarted (the other calls in
    // flight on it are retried, as the issue asks).
    slot.proc->kill("a script of interface " + culprit +
                    " ran past its timeout; restarting its worker");
  }
  drainBacklog(g);
}

void WorkerPool::onService(WorkerSlot& slot, const proto::ServiceRequest& m) {
  ServiceCall call = serviceCallOf(m);
  bool dryRun = false;
  if (auto* c = slot.calls.find(m.callId)) {
    call.interfaceName = c->iface->spec.name;
    dryRun = c->dryRun;
  }
  uint64_t requestId = m.requestId;
  if (dryRun)
    if (auto mocked = mockedAnswer(call)) {
      slot.proc->send(proto::ServiceReply{requestId, true, *mocked});
      return;
    }
  std::weak_ptr<WorkerPool*> alive = alive_;
  WorkerSlot* target = &slot;
  uint64_t incarnation = slot.incarnation;
  services_.call(call, [alive, target, incarnation, requestId](Result<std::string> r) {
    auto pool = alive.lock();
    if (!pool || !*pool) return;
    if (target->incarnation != incarnation || !target->proc || target->proc->exited()) return;
    target->proc->send(r ? proto::ServiceReply{requestId, true, *r}
                         : proto::ServiceReply{requestId, false, r.error().message});
  });
}

void WorkerPool::onLog(WorkerSlot& slot, const proto::Log& m) {
  std::string who = slot.group->name;
  if (auto* c = slot.calls.find(m.callId)) who = c->iface->spec.name;
  auto lvl = m.level == "error"   ? spdlog::level::err
             : m.level == "warn"  ? spdlog::level::warn
             : m.level == "debug" ? spdlog::level::debug
                                  : spdlog::level::info;
  spdlog::log(lvl, "[{}] {}", who, m.text);
}

void WorkerPool::onExit(WorkerSlot& slot, int64_t status, int signal, const std::string& why) {
  pid_t pid = slot.proc ? slot.proc->pid() : 0;
  std::string how = proto::howExited(status, signal);
  if (!shuttingDown_) {
    spdlog::warn("worker {} (pool {}) exited {}{}{}", pid, slot.group->name, how,
                 why.empty() ? "" : ": ", why);
  }
  auto calls = slot.calls.takeAll();
  // The process object goes after this callback returns (libuv is still
  // inside its exit callback).
  std::unique_ptr<WorkerProcess> gone = std::move(slot.proc);
  // A death we did not cause with one call in flight: that call's script is
  // the likely cause (V8 dies this way when a heap bomb outruns the guard).
  bool unexplained = why.empty() && signal != 0 && status != proto::kExitHeapOverflow;
  for (auto& [id, c] : calls) {
    Outcome out;
    if (c.culprit) {
      out = {Outcome::Kind::RunawayTimeout,
             "the script did not answer within its timeout + grace; its worker was killed"};
    } else if (unexplained && calls.size() == 1) {
      out = {Outcome::Kind::RunawayHeap, "the worker died " + how + " while running this call"};
    } else {
      out = {Outcome::Kind::Transient, proto::transientText("its worker exited " + how)};
    }
    if (c.culprit || out.kind == Outcome::Kind::RunawayHeap) slot.killedFor = c.iface->spec.name;
    noteRunaway(c, out);
    finish(*c.iface, c.done, std::move(out), c.dryRun);
  }

  if (shuttingDown_) {
    bool all = true;
    for (auto& g : groups_)
      for (auto& s : g->slots)
        if (s->proc && !s->proc->exited()) all = false;
    if (all && shutdownDone_) {
      auto done = std::move(shutdownDone_);
      shutdownDone_ = nullptr;
      done();
    }
    gone.reset();
    return;
  }

  // A worker that dies before saying whether the code loads (a crash in
  // its top-level code): a verdict, not something to wait for. Not one we
  // killed to load new code: its successor gives the verdict.
  bool replaced = std::exchange(slot.replacing, false);
  if (!replaced)
    failPendingLoads(*slot.group, "its worker exited " + how + " while loading its code" +
                                      (why.empty() ? "" : " (" + why + ")"));
  // Restart, backing off when the worker dies right after starting.
  restarts_++;
  if (options_.events) {
    // Whose it was: the interface that had it killed, a dedicated group's
    // own, or none (the shared group serves them all).
    std::string who = !slot.killedFor.empty()          ? slot.killedFor
                      : slot.group != groups_[0].get() ? slot.group->name
                                                       : std::string();
    options_.events->record({events::Kind::WorkerRestarted, who, "", 0,
                             "worker " + std::to_string(pid) + " (pool " + slot.group->name +
                                 ") exited " + how + (why.empty() ? "" : ": " + why) +
                                 "; started again"});
  }
  if (replaced) slot.quickDeaths = 0;
  else if (options_.clock() - slot.startedAt < std::chrono::seconds(1)) slot.quickDeaths++;
  else slot.quickDeaths = 0;
  auto delay = std::chrono::milliseconds(0);
  if (slot.quickDeaths > 1) delay = kRestartBackoff.after(slot.quickDeaths);
  restartLater(slot, delay);
  gone.reset();
  drainBacklog(*slot.group);
}

void WorkerPool::checkDeadlines() {
  auto now = Clock::now();
  for (auto& g : groups_) {
    for (auto& s : g->slots) {
      if (!s->proc || s->proc->exited() || s->proc->killing()) continue;
      // Still starting: no call has begun to run, so none is overdue yet
      // (its clock starts at `ready`, which sets lastHeard). A start that
      // never ends is the worker's fault, not a script's.
      if (!s->proc->ready()) {
        if (!s->calls.empty() && now - s->spawnedAt >= options_.startAllowance)
          s->proc->kill("it did not say it was ready within " +
                        std::to_string(options_.startAllowance.count()) + " ms of starting");
        continue;
      }
      // The others queued behind the one it was running, and are retried
      // elsewhere.
      InFlight* oldest = s->calls.oldestOverdue(now, s->lastHeard);
      if (!oldest || oldest->culprit) continue;
      oldest->culprit = true;
      s->killedFor = oldest->iface->spec.name;
      s->proc->kill("call " + std::to_string(oldest->callId) + " of interface " +
                    oldest->iface->spec.name + " did not answer, and its worker said nothing, within its timeout + grace");
    }
  }
}

void WorkerPool::shutdown(std::function<void()> done) {
  shuttingDown_ = true;
  bool any = false;
  for (auto& g : groups_) {
    for (auto& s : g->slots) {
      if (s->restartTimer) uv_timer_stop(s->restartTimer.get());
      if (!s->proc || s->proc->exited()) continue;
      s->proc->send(proto::Shutdown{});
      any = true;
    }
  }
  if (!any) {
    if (done) done();
    return;
  }
  shutdownDone_ = std::move(done);
}

}  // namespace ductus::supervisor
