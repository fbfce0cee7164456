#include "supervisor/cli/worker_session.h"

#include <capnp/message.h>

namespace ductus::supervisor {
namespace {

// How long a load may take past the interface's timeout (the worker's own
// watchdog stops top-level code at the timeout), and a silent call past its.
constexpr std::chrono::milliseconds kGrace{2000};
// A worker asked to stop that has not within this is killed.
constexpr std::chrono::milliseconds kShutdownWait{5000};

Outcome::Kind kindOf(proto::OutcomeKind k) {
  switch (k) {
    case proto::OutcomeKind::OUTPUT: return Outcome::Kind::Output;
    case proto::OutcomeKind::FILTERED: return Outcome::Kind::Filtered;
    case proto::OutcomeKind::TRANSIENT: return Outcome::Kind::Transient;
    case proto::OutcomeKind::RUNAWAY_TIMEOUT: return Outcome::Kind::RunawayTimeout;
    case proto::OutcomeKind::RUNAWAY_HEAP: return Outcome::Kind::RunawayHeap;
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
    capnp::MallocMessageBuilder b;
    b.initRoot<proto::ToWorker>().setShutdown();
    proc_->send(b);
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
  capnp::MallocMessageBuilder b;
  fillLoad(b.initRoot<proto::ToWorker>().initLoad(), interfaceId, spec, modules, functionIds);
  proc_->send(b);
  waitingLoad_ = interfaceId;
  loaded_.reset();
  runUntil([this] { return loaded_.has_value(); }, spec.timeout + kGrace);
  waitingLoad_ = 0;
  if (loaded_) return *loaded_;
  return Error{modules.entry + ": the worker exited while loading it" + exitText_};
}

Outcome WorkerSession::invoke(uint32_t functionId, const std::string& payload,
                              const CallMeta& meta, std::chrono::milliseconds timeout) {
  if (exited()) return {Outcome::Kind::Quarantine, "the worker has exited" + exitText_};
  uint64_t callId = nextCallId_++;
  capnp::MallocMessageBuilder b;
  auto inv = b.initRoot<proto::ToWorker>().initInvoke();
  inv.setCallId(callId);
  inv.setFunctionId(functionId);
  inv.setPayload(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(payload.data()), payload.size()));
  auto m = inv.initMeta();
  m.setMessageId(meta.messageId);
  m.setReceivedAtMs(meta.receivedAtMs);
  m.setDestination(meta.destination);
  m.setOriginId(meta.originId);
  proc_->send(b);
  waitingCall_ = callId;
  outcome_.reset();
  runUntil([this] { return outcome_.has_value(); }, timeout + kGrace);
  waitingCall_ = 0;
  if (outcome_) return std::move(*outcome_);
  return {Outcome::Kind::RunawayHeap, "the worker died while running the script" + exitText_};
}

void WorkerSession::onFrame(WorkerProcess& w, proto::FromWorker::Reader msg) {
  switch (msg.which()) {
    case proto::FromWorker::LOADED: {
      auto l = msg.getLoaded();
      if (l.getInterfaceId() != waitingLoad_) return;
      loaded_ = l.isError() ? Status(Error{l.getError()}) : Status();
      return;
    }
    case proto::FromWorker::OUTCOME: {
      auto o = msg.getOutcome();
      if (o.getCallId() != waitingCall_) return;
      auto d = o.getData();
      outcome_ = Outcome{kindOf(o.getKind()),
                         std::string(reinterpret_cast<const char*>(d.begin()), d.size())};
      return;
    }
    case proto::FromWorker::SERVICE: {
      auto s = msg.getService();
      Result<std::string> answer =
          services_ ? services_(serviceCallOf(s)) : Result<std::string>(Error{"no services here"});
      capnp::MallocMessageBuilder b;
      auto reply = b.initRoot<proto::ToWorker>().initServiceReply();
      reply.setRequestId(s.getRequestId());
      if (answer)
        reply.setOk(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(answer->data()), answer->size()));
      else
        reply.setError(answer.error().message);
      w.send(b);
      return;
    }
    case proto::FromWorker::LOG:
      if (logs_) logs_(msg.getLog().getLevel(), msg.getLog().getText());
      return;
    default: return;
  }
}

void WorkerSession::onExit(WorkerProcess&, int64_t status, int signal, const std::string& why) {
  exitText_ = " (" + (signal ? "on signal " + std::to_string(signal) : "with code " + std::to_string(status)) +
              (why.empty() ? "" : ": " + why) + ")";
}

}  // namespace ductus::supervisor
