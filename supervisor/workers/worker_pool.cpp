#include "supervisor/workers/worker_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "proto/contract.h"
#include "proto/frame.h"
#include "proto/worker_exit.h"
#include "supervisor/delivery/backoff.h"

namespace ductus::supervisor {
namespace {

// What an invoke frame carries besides the payload and the destination's
// name: the call id, function id, meta and Cap'n Proto's framing.
constexpr size_t kFrameEnvelopeBytes = 4096;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// What a worker process may hand us: bounded so a project folder with a
// stray bundle does not fill every worker's heap.
constexpr uintmax_t kMaxModuleBytes = 4u << 20;
constexpr uintmax_t kMaxModuleSetBytes = 32u << 20;
constexpr auto kDeadlineTick = std::chrono::milliseconds(50);
constexpr auto kMaxRestartDelay = std::chrono::milliseconds(5000);
// A worker that dies right after starting, again and again: 400 ms after
// the second quick death, doubling to kMaxRestartDelay.
constexpr delivery::Backoff kRestartBackoff{std::chrono::milliseconds(100), kMaxRestartDelay};

bool isModuleFile(const fs::path& p, bool includeTests) {
  auto name = p.filename().string();
  bool js = name.ends_with(".js") || name.ends_with(".mjs");
  bool test = name.ends_with(".test.js") || name.ends_with(".test.mjs");
  return js && (includeTests || !test);
}

Status readTree(const fs::path& root, const std::string& prefix, bool includeTests,
                ModuleSet& out, uintmax_t& total) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return {};
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_directory() && it->path().filename() == "node_modules") {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || !isModuleFile(it->path(), includeTests)) continue;
    auto size = it->file_size();
    std::string spec = prefix + fs::relative(it->path(), root).generic_string();
    if (size > kMaxModuleBytes)
      return Error{spec + " is " + std::to_string(size) + " bytes, over the module limit of " +
                   std::to_string(kMaxModuleBytes)};
    total += size;
    if (total > kMaxModuleSetBytes)
      return Error{"the modules of " + prefix + " and lib/ are over " +
                   std::to_string(kMaxModuleSetBytes) + " bytes together"};
    std::ifstream in(it->path(), std::ios::binary);
    if (!in) return Error::fromErrno("cannot read " + it->path().string());
    std::ostringstream text;
    text << in.rdbuf();
    out.modules[spec] = text.str();
  }
  if (ec) return Error{"cannot list " + root.string() + ": " + ec.message()};
  return {};
}

proto::ToWorker::Builder toWorker(capnp::MessageBuilder& b) {
  return b.initRoot<proto::ToWorker>();
}

}  // namespace

ServiceCall serviceCallOf(proto::ServiceRequest::Reader s) {
  ServiceCall call{};
  switch (s.which()) {
    case proto::ServiceRequest::DB_QUERY:
    case proto::ServiceRequest::DB_EXECUTE: {
      bool q = s.isDbQuery();
      auto d = q ? s.getDbQuery() : s.getDbExecute();
      call.kind = q ? ServiceCall::Kind::DbQuery : ServiceCall::Kind::DbExecute;
      call.resource = d.getResource();
      call.sql = d.getSql();
      call.paramsJson = d.getParamsJson();
      break;
    }
    case proto::ServiceRequest::FETCH: {
      auto f = s.getFetch();
      call.kind = ServiceCall::Kind::Fetch;
      call.url = f.getUrl();
      call.api = f.getApi();
      call.initJson = f.getInitJson();
      break;
    }
    case proto::ServiceRequest::ENV:
      call.kind = ServiceCall::Kind::Env;
      call.name = s.getEnv();
      break;
    case proto::ServiceRequest::SECRET:
      call.kind = ServiceCall::Kind::Secret;
      call.name = s.getSecret();
      break;
  }
  if (s.getTimeLeftMs() > 0) call.timeLeft = std::chrono::milliseconds(s.getTimeLeftMs());
  return call;
}

Result<ModuleSet> readInterfaceModules(const InterfaceSpec& spec, bool includeTests) {
  ModuleSet set;
  std::string prefix = "interfaces/" + spec.name + "/";
  set.entry = prefix + spec.entryFile;
  uintmax_t total = 0;
  if (auto s = readTree(spec.dir, prefix, includeTests, set, total); !s) return s.error();
  if (!spec.projectLib.empty()) {
    if (auto s = readTree(spec.projectLib, "lib/", includeTests, set, total); !s) return s.error();
  }
  if (!set.modules.count(set.entry))
    return Error{(spec.dir / spec.entryFile).string() + ": no such file"};
  return set;
}

InterfaceSpec interfaceSpecOf(const config::Project& project, const config::InterfaceConfig& c) {
  InterfaceSpec spec;
  spec.name = c.name;
  spec.dir = c.folder;
  spec.projectLib = project.root / "lib";
  spec.entryFile = c.code;
  spec.timeout = c.timeout;
  spec.dedicated = c.isolation == config::Isolation::Dedicated;
  spec.workers = static_cast<int>(c.workers);
  if (c.respondMode()) {
    spec.functions.push_back({c.respond, "http", "http", "", config::charsetName(c.charset)});
  }
  // A schedule's run record is JSON whatever format: says; a CSV split into
  // records reaches the transform as one record keyed by its header.
  const auto* files = std::get_if<config::FileSource>(&c.source);
  std::string input =
      std::holds_alternative<config::ScheduleSource>(c.source) ? "json"
      : c.format == config::Format::Csv && files && files->files.split == config::Split::Records
          ? "csv-record"
          : config::formatName(c.format);
  for (auto& d : c.destinations)
    spec.functions.push_back({d.transform, input, config::formatName(d.output), d.name,
                              config::charsetName(c.charset)});
  return spec;
}

void fillLoad(proto::LoadInterface::Builder l, uint32_t interfaceId, const InterfaceSpec& spec,
              const ModuleSet& modules, const std::vector<uint32_t>& functionIds) {
  l.setInterfaceId(interfaceId);
  l.setName(spec.name);
  l.setEntry(modules.entry);
  auto mods = l.initModules(static_cast<unsigned>(modules.modules.size()));
  unsigned i = 0;
  for (auto& [specifier, source] : modules.modules) {
    mods[i].setSpecifier(specifier);
    mods[i].setSource(source);
    ++i;
  }
  auto fns = l.initFunctions(static_cast<unsigned>(spec.functions.size()));
  for (unsigned k = 0; k < spec.functions.size(); ++k) {
    const auto& f = spec.functions[k];
    fns[k].setFunctionId(functionIds.at(k));
    fns[k].setExportName(f.exportName);
    fns[k].setInputFormat(f.inputFormat);
    fns[k].setOutputFormat(f.outputFormat);
    fns[k].setDestination(f.destination);
    fns[k].setCharset(f.charset);
  }
  l.setTimeoutMs(static_cast<uint32_t>(spec.timeout.count()));
}

std::string placeLoadError(const fs::path& projectRoot, const std::string& error) {
  if (!error.starts_with("interfaces/") && !error.starts_with("lib/")) return error;
  return (projectRoot / error).string();
}

void AllowlistedEnv::call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) {
  if (call.kind != ServiceCall::Kind::Env) {
    if (next_) return next_->call(call, std::move(reply));
    return reply(Error{"no service handler for this request"});
  }
  auto it = values_.find(call.name);
  if (it == values_.end())
    return reply(Error{"env(\"" + call.name + "\") is not a variable this interface may read"});
  // A JSON string.
  std::string json = "\"";
  for (char c : it->second) {
    if (c == '"' || c == '\\') json += '\\', json += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      json += buf;
    } else json += c;
  }
  reply(json + "\"");
}

// ---- the pool's state ---------------------------------------------------------

struct WorkerPool::Interface {
  InterfaceSpec spec;
  ModuleSet modules;
  uint32_t id = 0;
  std::vector<FunctionId> functions;
  Group* group = nullptr;
  int consecutiveTimeouts = 0;
  bool stopped = false;
  std::string stopReason;
  std::function<void(Status)> loaded;
};

struct WorkerPool::Slot : WorkerProcess::Events {
  WorkerPool* pool = nullptr;
  Group* group = nullptr;
  int index = 0;
  std::unique_ptr<WorkerProcess> proc;
  uint64_t incarnation = 0;
  std::unordered_map<uint64_t, InFlight> calls;
  Clock::time_point startedAt;
  Clock::time_point lastHeard;  // the worker's last frame: it is alive and working
  int quickDeaths = 0;
  UvHandle<uv_timer_t> restartTimer;
  std::set<uint32_t> loadedIds;  // interfaces sent to this incarnation
  bool replacing = false;        // killed to load an interface's new code

  void onFrame(WorkerProcess&, proto::FromWorker::Reader msg) override {
    lastHeard = Clock::now();
    pool->onFrame(*this, msg);
  }
  void onExit(WorkerProcess&, int64_t status, int signal, const std::string& why) override {
    pool->onExit(*this, status, signal, why);
  }
};

struct WorkerPool::Group {
  std::string name;  // "shared" or the dedicated interface's name
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<Interface*> interfaces;
  std::deque<Queued> backlog;
};

WorkerPool::WorkerPool(uv_loop_t* loop, Options options, ServiceHandler& services)
    : loop_(loop), options_(std::move(options)), services_(services) {
  auto shared = std::make_unique<Group>();
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
  auto iface = std::make_unique<Interface>();
  iface->spec = spec;
  iface->modules = std::move(modules);
  iface->id = static_cast<uint32_t>(interfaces_.size() + 1);
  iface->loaded = std::move(loaded);
  for (size_t i = 0; i < spec.functions.size(); ++i) {
    FunctionId id = static_cast<FunctionId>(functions_.size() + 1);
    functions_[id] = {iface.get(), static_cast<uint32_t>(i)};
    iface->functions.push_back(id);
  }
  Group* g;
  if (spec.dedicated) {
    auto own = std::make_unique<Group>();
    own->name = spec.name;
    g = own.get();
    groups_.push_back(std::move(own));
  } else {
    g = groups_[0].get();
  }
  iface->group = g;
  g->interfaces.push_back(iface.get());
  Interface* raw = iface.get();
  interfaces_.push_back(std::move(iface));

  int want = spec.dedicated ? std::max(1, spec.workers) : std::max(1, options_.sharedWorkers);
  for (auto& slot : g->slots)
    if (slot->proc) loadInto(*slot, *raw);
  while (static_cast<int>(g->slots.size()) < want) {
    auto slot = std::make_unique<Slot>();
    slot->pool = this;
    slot->group = g;
    slot->index = static_cast<int>(g->slots.size());
    Slot& s = *slot;
    g->slots.push_back(std::move(slot));
    startSlot(s);
  }
  return raw->functions;
}

void WorkerPool::startSlot(Slot& slot) {
  if (shuttingDown_) return;
  auto proc = WorkerProcess::spawn(loop_, {options_.binary, options_.heapMb}, slot);
  slot.incarnation++;
  slot.startedAt = Clock::now();
  if (!proc) {
    spdlog::error("worker pool {}: cannot start worker {}: {}", slot.group->name, slot.index,
                  proc.error().message);
    slot.quickDeaths++;
    // Whoever waits to hear whether the code loads would wait for ever.
    failPendingLoads(*slot.group, "no worker could be started to load its code: " +
                                      proc.error().message);
  } else {
    slot.proc = std::move(*proc);
    slot.loadedIds.clear();
    spdlog::debug("worker pool {}: worker {} started as pid {}", slot.group->name, slot.index,
                  slot.proc->pid());
    // A stopped interface stays out of new workers: its code is what
    // broke the last one, or does not load at all.
    for (Interface* i : slot.group->interfaces)
      if (!i->stopped) loadInto(slot, *i);
    drainBacklog(*slot.group);
    return;
  }
  // Try again later.
  restartLater(slot, kMaxRestartDelay);
}

void WorkerPool::restartLater(Slot& slot, std::chrono::milliseconds delay) {
  if (!slot.restartTimer) slot.restartTimer = makeTimer(loop_, &slot);
  uv_timer_start(
      slot.restartTimer.get(),
      [](uv_timer_t* t) {
        auto* s = static_cast<Slot*>(t->data);
        if (s) s->pool->startSlot(*s);
      },
      static_cast<uint64_t>(delay.count()), 0);
}

void WorkerPool::loadInto(Slot& slot, Interface& iface) {
  capnp::MallocMessageBuilder b;
  fillLoad(toWorker(b).initLoad(), iface.id, iface.spec, iface.modules, iface.functions);
  slot.proc->send(b);
  slot.loadedIds.insert(iface.id);
}

void WorkerPool::failPendingLoads(Group& g, const std::string& why) {
  for (Interface* i : g.interfaces) {
    if (auto cb = std::move(i->loaded)) {
      i->loaded = nullptr;
      cb(Error{i->spec.name + ": " + why});
    }
  }
}

WorkerPool::Slot* WorkerPool::pickSlot(Group& g) {
  Slot* best = nullptr;
  for (auto& s : g.slots) {
    if (!s->proc || s->proc->exited() || s->proc->killing() ||
        s->calls.size() >= options_.maxInFlightPerWorker)
      continue;
    if (!best || s->calls.size() < best->calls.size()) best = s.get();
  }
  return best;
}

void WorkerPool::invoke(FunctionId fn, std::string payload, CallMeta meta, OutcomeCallback done) {
  auto it = functions_.find(fn);
  if (it == functions_.end()) {
    done({Outcome::Kind::Transient, proto::transientText("unknown function " + std::to_string(fn))});
    return;
  }
  Interface& iface = *it->second.first;
  if (iface.stopped) {
    done({Outcome::Kind::Stopped, iface.stopReason});
    return;
  }
  Group& g = *iface.group;
  Slot* slot = g.backlog.empty() ? pickSlot(g) : nullptr;
  if (!slot) {
    g.backlog.push_back({fn, std::move(payload), std::move(meta), std::move(done)});
    return;
  }
  send(*slot, iface, fn, std::move(payload), meta, std::move(done));
}

void WorkerPool::send(Slot& slot, Interface& iface, FunctionId fn, std::string payload,
                      const CallMeta& meta, OutcomeCallback done) {
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
  slot.calls[callId] =
      InFlight{callId, &iface, Clock::now(),
               std::chrono::duration_cast<std::chrono::milliseconds>(iface.spec.timeout +
                                                                     options_.grace),
               std::move(done)};
  size_t hintWords = (payload.size() + meta.destination.size()) / sizeof(capnp::word) + 32;
  slot.proc->send(hintWords, [&](capnp::MessageBuilder& b) {
    auto inv = toWorker(b).initInvoke();
    inv.setCallId(callId);
    inv.setFunctionId(fn);
    inv.setPayload(
        kj::arrayPtr(reinterpret_cast<const capnp::byte*>(payload.data()), payload.size()));
    auto m = inv.initMeta();
    m.setMessageId(meta.messageId);
    m.setReceivedAtMs(meta.receivedAtMs);
    m.setDestination(meta.destination);
    m.setOriginId(meta.originId);
  });
}

void WorkerPool::drainBacklog(Group& g) {
  while (!g.backlog.empty()) {
    Queued& q = g.backlog.front();
    auto it = functions_.find(q.fn);
    Interface& iface = *it->second.first;
    if (iface.stopped) {
      auto done = std::move(q.done);
      g.backlog.pop_front();
      done({Outcome::Kind::Stopped, iface.stopReason});
      continue;
    }
    Slot* slot = pickSlot(g);
    if (!slot) return;
    Queued item = std::move(q);
    g.backlog.pop_front();
    send(*slot, iface, item.fn, std::move(item.payload), item.meta, std::move(item.done));
  }
}

void WorkerPool::finish(Interface& iface, OutcomeCallback& done, Outcome outcome) {
  switch (outcome.kind) {
    case Outcome::Kind::RunawayTimeout:
      if (++iface.consecutiveTimeouts >= options_.timeoutsToStop)
        stopInterface(iface, std::to_string(iface.consecutiveTimeouts) +
                                 " runaway timeouts in a row");
      break;
    case Outcome::Kind::RunawayHeap:
      stopInterface(iface, "a script ran over the heap limit");
      break;
    case Outcome::Kind::Output:
    case Outcome::Kind::Filtered:
    case Outcome::Kind::Quarantine:
      iface.consecutiveTimeouts = 0;
      break;
    default: break;
  }
  if (done) done(std::move(outcome));
}

void WorkerPool::stopInterface(Interface& iface, const std::string& why, bool quiet) {
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
  Interface* iface = nullptr;
  for (auto& i : interfaces_)
    if (i->spec.name == name) iface = i.get();
  if (!iface) return Error{"no interface " + name, ErrorKind::NotFound};
  if (!iface->stopped) return Error{"interface " + name + " is running", ErrorKind::Conflict};
  if (shuttingDown_) return Error{"the workers are shutting down", ErrorKind::Unavailable};
  iface->modules = std::move(modules);
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

// ---- frames from a worker -----------------------------------------------------

void WorkerPool::onFrame(Slot& slot, proto::FromWorker::Reader msg) {
  switch (msg.which()) {
    case proto::FromWorker::LOADED: {
      auto l = msg.getLoaded();
      Interface* iface = nullptr;
      for (auto& i : interfaces_)
        if (i->id == l.getInterfaceId()) iface = i.get();
      // A worker speaks only for the interfaces of its own group: one that
      // names another (a script that escaped V8 could try, to stop an
      // interface it cannot reach) is not a worker of ours any more.
      if (!iface || iface->group != slot.group) {
        if (slot.proc)
          slot.proc->kill("it reported loading interface " + std::to_string(l.getInterfaceId()) +
                          ", which is not of its group");
        return;
      }
      Status result;
      if (l.isError()) result = Error{l.getError()};
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
      return;
    }
    case proto::FromWorker::OUTCOME: {
      // Every field is read before the call leaves the table: a malformed
      // frame throws here, the worker is killed, and the call is answered
      // with the others of the dead worker, never left waiting.
      auto o = msg.getOutcome();
      uint64_t callId = o.getCallId();
      auto kind = o.getKind();
      auto d = o.getData();
      std::string data(reinterpret_cast<const char*>(d.begin()), d.size());
      auto it = slot.calls.find(callId);
      if (it == slot.calls.end()) return;  // settled already (worker killed meanwhile)
      InFlight call = std::move(it->second);
      slot.calls.erase(it);
      Outcome out{Outcome::Kind::Output, {}};
      switch (kind) {
        case proto::OutcomeKind::OUTPUT: out = {Outcome::Kind::Output, std::move(data)}; break;
        case proto::OutcomeKind::FILTERED: out = {Outcome::Kind::Filtered, std::move(data)}; break;
        case proto::OutcomeKind::QUARANTINE:
          out = {Outcome::Kind::Quarantine, std::move(data)};
          break;
        case proto::OutcomeKind::TRANSIENT: out = {Outcome::Kind::Transient, std::move(data)}; break;
        case proto::OutcomeKind::RUNAWAY_HEAP:
          out = {Outcome::Kind::RunawayHeap,
                 "the script used more memory than the heap limit allows (isolates.heap_mb)"};
          break;
        case proto::OutcomeKind::RUNAWAY_TIMEOUT:
          out = {Outcome::Kind::RunawayTimeout,
                 "the script ran past its timeout of " +
                     std::to_string(call.iface->spec.timeout.count()) + " ms and was stopped"};
          break;
        default:
          // A kind this build does not know: the worker is not ours to trust.
          out = {Outcome::Kind::Quarantine,
                 "the worker answered an outcome of unknown kind " +
                     std::to_string(static_cast<int>(kind))};
          break;
      }
      Group& g = *slot.group;
      bool runaway = out.kind == Outcome::Kind::RunawayTimeout;
      std::string culprit = call.iface->spec.name;
      finish(*call.iface, call.done, std::move(out));
      if (runaway && slot.proc) {
        // The isolate survived the terminated script, but its module state
        // may be half-changed: the worker is restarted (the other calls in
        // flight on it are retried, as the issue asks).
        slot.proc->kill("a script of interface " + culprit +
                        " ran past its timeout; restarting its worker");
      }
      drainBacklog(g);
      return;
    }
    case proto::FromWorker::SERVICE: {
      auto s = msg.getService();
      ServiceCall call = serviceCallOf(s);
      auto it = slot.calls.find(s.getCallId());
      if (it != slot.calls.end()) call.interfaceName = it->second.iface->spec.name;
      uint64_t requestId = s.getRequestId();
      std::weak_ptr<WorkerPool*> alive = alive_;
      Slot* target = &slot;
      uint64_t incarnation = slot.incarnation;
      services_.call(call, [alive, target, incarnation, requestId](Result<std::string> r) {
        auto pool = alive.lock();
        if (!pool || !*pool) return;
        if (target->incarnation != incarnation || !target->proc || target->proc->exited()) return;
        capnp::MallocMessageBuilder b;
        auto reply = toWorker(b).initServiceReply();
        reply.setRequestId(requestId);
        if (r) {
          reply.setOk(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(r->data()), r->size()));
        } else {
          reply.setError(r.error().message);
        }
        target->proc->send(b);
      });
      return;
    }
    case proto::FromWorker::LOG: {
      auto l = msg.getLog();
      std::string who = slot.group->name;
      if (auto it = slot.calls.find(l.getCallId()); it != slot.calls.end())
        who = it->second.iface->spec.name;
      std::string level = l.getLevel();
      auto lvl = level == "error" ? spdlog::level::err
                 : level == "warn" ? spdlog::level::warn
                 : level == "debug" ? spdlog::level::debug
                                    : spdlog::level::info;
      spdlog::log(lvl, "[{}] {}", who, l.getText().cStr());
      return;
    }
    case proto::FromWorker::READY:
    case proto::FromWorker::PONG:
      return;
  }
}

void WorkerPool::onExit(Slot& slot, int64_t status, int signal, const std::string& why) {
  pid_t pid = slot.proc ? slot.proc->pid() : 0;
  std::string how = signal ? "on signal " + std::to_string(signal)
                           : "with code " + std::to_string(status);
  if (!shuttingDown_) {
    spdlog::warn("worker {} (pool {}) exited {}{}{}", pid, slot.group->name, how,
                 why.empty() ? "" : ": ", why);
  }
  auto calls = std::move(slot.calls);
  slot.calls.clear();
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
    finish(*c.iface, c.done, std::move(out));
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
  if (replaced) slot.quickDeaths = 0;
  else if (Clock::now() - slot.startedAt < std::chrono::seconds(1)) slot.quickDeaths++;
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
      if (!s->proc || s->proc->exited()) continue;
      // Of the overdue calls, the one sent first is the one the worker was
      // running: the others queued behind it, and are retried elsewhere.
      InFlight* oldest = nullptr;
      for (auto& [id, c] : s->calls) {
        auto from = std::max(c.sentAt, s->lastHeard);
        if (now - from >= c.silence && (!oldest || c.sentAt < oldest->sentAt)) oldest = &c;
      }
      if (!oldest || oldest->culprit) continue;
      oldest->culprit = true;
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
      capnp::MallocMessageBuilder b;
      toWorker(b).setShutdown();
      s->proc->send(b);
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
