#include "supervisor/cli/worker_session.h"

#include "proto/worker_exit.h"

namespace ductus::supervisor {
namespace {

// How long a load may take past the interface's timeout (the worker's own
// watchdog stops top-level code at the timeout), and a silent call past its.
constexpr std::chrono::milliseconds kGrace{2000};
// A worker asked to stop that has not within this is killed.
constexpr std::chrono::milliseconds kShutdownWait{5000};

using delivery::Outcome;

Outcome::Kind kindOf(proto::OutcomeKind k) {
  switch (k) {
    case proto::OutcomeKind::Output: return Outcome::Kind::Output;
    case proto::OutcomeKind::Filtered: return Outcome::Kind::Filtered;
    case proto::OutcomeKind::Transient: return Outcome::Kind::Transient;
    case proto::OutcomeKind::RunawayTimeout: return Outcome::Kind::RunawayTimeout;
    case proto::OutcomeKind::RunawayHeap: return Outcome::Kind::RunawayHeap;
    default: return Outcome::Kind::Quarantine;
  }
}

}  // namespace

Result<std::unique_ptr<WorkerSession>> WorkerSession::start(const Options& options) {
  std::unique_ptr<WorkerSession> s(new WorkerSession());  // private constructor
  if (int rc = uv_loop_init(&s->loop_); rc != 0)
    return Error{std::string("cannot make an event loop: ") + uv_strerror(rc)};
  s->loopOpen_ = true;
  s->timer_ = makeTimer(&s->loop_, s.get());
  auto proc = WorkerProcess::spawn(&s->loop_, {options.binary, options.heapMb}, *s);
  if (!proc) return proc.error();
  s->proc_ = std::move(*proc);
  return s;
}

WorkerSession::~WorkerSession() {
  if (proc_ && !proc_->exited()) {
    proc_->send(proto::Shutdown{});
    runUntil([] { return false; }, kShutdownWait);
  }
  proc_.reset();
  timer_.reset();
  if (!loopOpen_) return;
  // Let the closing handles finish before the loop goes.
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
}

bool WorkerSession::runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  bool late = false;
  timer_->data = &late;
  uv_timer_start(
      timer_.get(), [](uv_timer_t* t) { *static_cast<bool*>(t->data) = true; },
      static_cast<uint64_t>(limit.count()), 0);
  while (!done() && !exited()) {
    if (late && !proc_->killing()) proc_->kill("it did not answer in time");
    uv_run(&loop_, UV_RUN_ONCE);
  }
  uv_timer_stop(timer_.get());
  return !exited();
}

Status WorkerSession::load(uint32_t interfaceId, const InterfaceSpec& spec,
                           const ModuleSet& modules, const std::vector<uint32_t>& functionIds) {
  if (exited()) return Error{"the worker has exited" + exitText_};
  proc_->send(loadOf(interfaceId, spec, modules, functionIds));
  waitingLoad_ = interfaceId;
  loaded_.reset();
  runUntil([this] { return loaded_.has_value(); }, spec.timeout + kGrace);
  waitingLoad_ = 0;
  if (loaded_) return *loaded_;
  return Error{modules.entry + ": the worker exited while loading it" + exitText_};
}

delivery::Outcome WorkerSession::invoke(uint32_t functionId, const std::string& payload,
                              const CallMeta& meta, std::chrono::milliseconds timeout) {
  if (exited()) return {Outcome::Kind::Quarantine, "the worker has exited" + exitText_};
  uint64_t callId = nextCallId_++;
  proc_->send(proto::Invoke{callId, functionId, payload, meta});
  waitingCall_ = callId;
  outcome_.reset();
  runUntil([this] { return outcome_.has_value(); }, timeout + kGrace);
  waitingCall_ = 0;
  if (outcome_) return std::move(*outcome_);
  return {Outcome::Kind::RunawayHeap, "the worker died while running the script" + exitText_};
}

void WorkerSession::onLoaded(WorkerProcess&, const proto::Loaded& m) {
  if (m.interfaceId != waitingLoad_) return;
  loaded_ = m.error ? Status(Error{*m.error}) : Status();
}

void WorkerSession::onOutcome(WorkerProcess&, const proto::Outcome& m) {
  if (m.callId != waitingCall_) return;
  outcome_ = Outcome{kindOf(m.kind), std::string(m.data)};
}

void WorkerSession::onService(WorkerProcess& w, const proto::ServiceRequest& m) {
  Result<std::string> answer =
      services_ ? services_(serviceCallOf(m)) : Result<std::string>(Error{"no services here"});
  w.send(answer ? proto::ServiceReply{m.requestId, true, *answer}
                : proto::ServiceReply{m.requestId, false, answer.error().message});
}

void WorkerSession::onLog(WorkerProcess&, const proto::Log& m) {
  if (logs_) logs_(std::string(m.level), std::string(m.text));
}

void WorkerSession::onExit(WorkerProcess&, int64_t status, int signal, const std::string& why) {
  exitText_ = " (" + proto::howExited(status, signal) + (why.empty() ? "" : ": " + why) + ")";
}

}  // namespace ductus::supervisor
