#include "supervisor/engine_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "common/detached_threads.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/uv_handle.h"
#include "supervisor/engine.h"
#include "supervisor/handover.h"
#include "supervisor/ownership.h"
#include "supervisor/systemd.h"

namespace ductus::supervisor {

// kUsageError's value (common/command_line.h, not included: it brings
// CLI11): the code for a command line that can't work, as without a
// database.
constexpr int kExitUsage = 2;

StartFailure startFailureOf(const Error& e) {
  switch (e.kind) {
    case ErrorKind::Code: return StartFailure::Code;
    case ErrorKind::OwnedElsewhere: return StartFailure::OwnedElsewhere;
    case ErrorKind::Stranded: return StartFailure::Stranded;
    default: return StartFailure::Other;
  }
}

int exitCodeOf(StartFailure f) {
  switch (f) {
    // The unit's RestartPreventExitStatus=3: restarting into the same
    // collision would only fail again.
    case StartFailure::OwnedElsewhere: return kExitOwnedElsewhere;
    case StartFailure::NoDatabase: return kExitUsage;
    case StartFailure::InvalidProject:
    case StartFailure::Handover:
    case StartFailure::Code:
    case StartFailure::Stranded:
    case StartFailure::Other: return 1;
  }
  return 1;
}

int exitCodeOf(StopCause c, std::optional<StartFailure> f) {
  switch (c) {
    case StopCause::Signal: return 0;
    case StopCause::OwnershipTaken: return kExitOwnedElsewhere;
    case StopCause::Failed: return exitCodeOf(f.value_or(StartFailure::Other));
    case StopCause::CutShort: return 1;
  }
  return 1;
}

void StopRequests::record(StopCause cause, std::optional<StartFailure> failure) {
  // The first code that says something went wrong stays: a signal during
  // the stop of an engine whose interfaces were taken still exits 3.
  if (exitCode_ == 0) exitCode_ = exitCodeOf(cause, failure);
  if (cause == StopCause::Signal && ++signals_ > 1) {
    pending_ = Action::ExitNow;
    return;
  }
  if (!begun_) {
    begun_ = true;
    pending_ = Action::BeginStop;
  }
}

StopRequests::Action StopRequests::take() { return std::exchange(pending_, Action::Nothing); }

namespace {

// Every connection, file and worker socket is a descriptor, and systemd
// starts services with a soft limit of 1,024 (the hard one is far higher):
// past it libuv closes new connections unanswered and file destinations
// fail with EMFILE. Raised to the hard limit, as servers do; said when the
// hard limit itself is low.
void raiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  rlim_t before = lim.rlim_cur;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) lim.rlim_cur = before;
  }
  if (lim.rlim_cur < 4096)
    spdlog::warn(
        "open files limit is {}: each connection, file and worker takes one; raise it "
        "(LimitNOFILE= in the systemd unit, ulimit -n) for more than a few hundred "
        "connections",
        static_cast<unsigned long long>(lim.rlim_cur));
  else if (lim.rlim_cur != before)
    spdlog::debug("open files limit raised from {} to {}", static_cast<unsigned long long>(before),
                  static_cast<unsigned long long>(lim.rlim_cur));
}

// An error of several lines, an error line each.
void logErrorLines(std::string_view lines) {
  while (!lines.empty()) {
    size_t nl = lines.find('\n');
    spdlog::error("{}", lines.substr(0, nl));
    lines = nl == lines.npos ? std::string_view() : lines.substr(nl + 1);
  }
}

// A signal handle on `loop`, started; its callback finds `data`.
UvHandle<uv_signal_t> startSignal(uv_loop_t* loop, void* data, int signum, uv_signal_cb cb) {
  auto h = UvHandle<uv_signal_t>::make();
  uv_signal_init(loop, h.get());  // cannot fail on an initialized loop
  h.markInitialized();
  h->data = data;
  uv_signal_start(h.get(), cb, signum);
  return h;
}

class EngineProcess {
 public:
  explicit EngineProcess(EngineProcessOptions options) : options_(std::move(options)) {
    uv_loop_init(&loop_);
  }
  ~EngineProcess();
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  int run(config::Project project);

 private:
  static void onSignal(uv_signal_t* h, int signum);
  static void onStopTimeout(uv_timer_t* t);
  // Records a stop, then acts on it: every stop is asked through here.
  void requestStop(StopCause cause, std::optional<StartFailure> failure = std::nullopt);
  // The one place a stop request is acted on.
  void act();
  // The engine did not start: why, in its own lines; the loop ends.
  void refuse(const Error& e);
  // The "started" line, READY=1 and onStarted, once.
  void sayStarted(const std::string& what);
  void startHandover(std::function<void(Result<int64_t>)> answer);
  void awaitRelease();
  void awaitCharge();
  void finish(int exitCode);

  EngineProcessOptions options_;
  uv_loop_t loop_;
  UvHandle<uv_signal_t> sigterm_, sigint_;
  UvHandle<uv_timer_t> stopTimer_;
  StopRequests stops_;
  int lastSignal_ = 0;
  int exitCode_ = 0;
  bool started_ = false;
  bool saidStarted_ = false;
  size_t interfaces_ = 0;
  std::chrono::steady_clock::time_point t0_;
  // Outlives the engine, which holds it.
  std::unique_ptr<Systemd> systemd_;
  // The command line as started, for a handover's new engine.
  std::vector<std::string> command_;
  Fd selfBinary_;  // O_PATH: the file the workers are started from
  std::unique_ptr<Successor> takeover_;    // this engine taking over
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Predecessor> handover_;  // this engine handing over
};

EngineProcess::~EngineProcess() {
  handover_.reset();
  engine_.reset();
  takeover_.reset();
  sigterm_.reset();
  sigint_.reset();
  stopTimer_.reset();
  // Close whatever is still open (a stop cut short by an error leaves
  // handles behind), let the close callbacks run, then free the loop.
  if (int rc = closeLoop(&loop_); rc != 0)
    spdlog::warn("event loop still busy at exit: {}", uv_strerror(rc));
}

void EngineProcess::onSignal(uv_signal_t* h, int signum) {
  auto* self = static_cast<EngineProcess*>(h->data);
  if (!self) return;
  self->lastSignal_ = signum;
  // The second one is said where it is acted on.
  if (!self->stops_.signalled())
    spdlog::info("signal {}: stopping (listeners close, in-flight messages are answered)",
                 signum);
  self->requestStop(StopCause::Signal);
}

void EngineProcess::onStopTimeout(uv_timer_t* t) {
  auto* self = static_cast<EngineProcess*>(t->data);
  if (!self) return;
  spdlog::error("stop did not finish within {} ms: exiting anyway",
                self->options_.stopTimeout.count());
  spdlog::default_logger()->flush();
  _exit(self->stops_.cutShortExitCode());
}

void EngineProcess::requestStop(StopCause cause, std::optional<StartFailure> failure) {
  stops_.record(cause, failure);
  act();
}

void EngineProcess::act() {
  switch (stops_.take()) {
    case StopRequests::Action::Nothing: return;
    case StopRequests::Action::ExitNow:
      spdlog::warn("second signal ({}): exiting now", lastSignal_);
      spdlog::default_logger()->flush();
      _exit(stops_.cutShortExitCode());
    case StopRequests::Action::BeginStop:
      uv_timer_start(stopTimer_.get(), onStopTimeout,
                     static_cast<uint64_t>(options_.stopTimeout.count()), 0);
      // Still starting: nothing to stop yet.
      if (!started_) return finish(stops_.exitCode());
      engine_->stop([this] {
        spdlog::info("stopped");
        finish(stops_.exitCode());
      });
      return;
  }
}

void EngineProcess::finish(int exitCode) {
  exitCode_ = exitCode;
  uv_stop(&loop_);
}

void EngineProcess::refuse(const Error& e) {
  StartFailure f = startFailureOf(e);
  if (takeover_) takeover_->failed(e.message);
  switch (f) {
    case StartFailure::Code: {
      // As validate prints them: file:line:column: message, one a line.
      std::string_view lines = e.message;
      while (!lines.empty()) {
        size_t nl = lines.find('\n');
        logPlain(spdlog::level::err, lines.substr(0, nl));
        lines = nl == lines.npos ? std::string_view() : lines.substr(nl + 1);
      }
      spdlog::error("interface code does not load; nothing was started (no listener opened)");
      break;
    }
    case StartFailure::OwnedElsewhere:
      // Who owns what, one a line; then the exit a supervisor won't retry.
      logErrorLines(e.message);
      spdlog::error("another live engine on this database owns the interfaces above; nothing "
                    "was started (exit {}). Stop that engine, or run these interfaces there",
                    exitCodeOf(f));
      break;
    case StartFailure::Stranded:
      logErrorLines(e.message);
      spdlog::error("lowered ordering.partitions would strand pending messages; nothing was "
                    "started (`ductus validate --database URL` shows the same)");
      break;
    default: spdlog::error("start failed: {}", e.message);
  }
  systemd_->removeStored();
  finish(exitCodeOf(f));
}

void EngineProcess::sayStarted(const std::string& what) {
  if (std::exchange(saidStarted_, true)) return;
  // The first listeners by name; a project of 1,001 made this one line of
  // 30 KB; each listener has said its own "listening on" line already.
  constexpr size_t kListed = 20;
  const auto& listeners = engine_->listeners();
  std::string list;
  for (size_t i = 0; i < listeners.size() && i < kListed; ++i)
    list += (list.empty() ? "" : ", ") + listeners[i];
  if (listeners.size() > kListed)
    list += " and " + std::to_string(listeners.size() - kListed) + " more";
  if (list.empty()) list = "nothing";
  spdlog::info("started: {}; listening: {}", what, list);
  systemd_->tell("READY=1\nSTATUS=started: " + std::to_string(interfaces_) +
                 " interface(s); listening: " + list);
  if (options_.onStarted) options_.onStarted(*engine_);
}

// A `handover` request on the control socket: a new engine started from
// the same command line takes over (supervisor/handover.h); this process
// exits 0 once it runs. Anything failing before leaves this engine as it was.
void EngineProcess::startHandover(std::function<void(Result<int64_t>)> answer) {
  if (!started_ || stops_.asked() || engine_->stopping())
    return answer(Error{"the engine is not running (starting or stopping)"});
  if (handover_ && handover_->active())
    return answer(Error{"a handover is already under way"});
  spdlog::info("handover asked: starting a new engine ({})",
               command_.empty() ? "?" : command_[0]);
  handover_ = std::make_unique<Predecessor>(
      Predecessor::Deps{&loop_, engine_.get(), systemd_.get(), command_});
  handover_->start(std::move(answer), [this](int code) {
    if (code == 0)
      spdlog::info("handed over: this engine stopped");
    else
      spdlog::error("the handover ended badly: exiting {}", code);
    finish(code);
  });
}

// Prepared (EngineOptions::takeover): say Ready and wait for the old engine
// to release; then take charge. The old engine going away before it
// released ends this one: it never owned anything.
void EngineProcess::awaitRelease() {
  takeover_->ready();
  spdlog::info("handover: prepared; waiting for the old engine (pid {}) to hand over",
               takeover_->predecessorPid());
  takeover_->watch(
      &loop_,
      [this] {
        auto t0 = std::chrono::steady_clock::now();
        systemd_->speak();  // systemd's main process from here
        engine_->takeCharge([this, t0](Status s) {
          if (!s) {
            StartFailure f = startFailureOf(s.error());
            if (f == StartFailure::OwnedElsewhere || f == StartFailure::Stranded)
              logErrorLines(s.error().message);
            else
              spdlog::error("taking charge failed: {}", s.error().message);
            takeover_->failed(s.error().message);
            return requestStop(StopCause::Failed, f);
          }
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
          sayStarted("took over " + std::to_string(interfaces_) + " interface(s) in " +
                     std::to_string(ms) + " ms");
          takeover_->running();
        });
      },
      [this] {
        spdlog::error("handover: the old engine went away before it handed over; stopping");
        requestStop(StopCause::Failed, StartFailure::Handover);
      });
}

// Prepared as a standby: ready for systemd, then waiting for the engine
// that owns the interfaces to go; "started:" once this one has them.
void EngineProcess::awaitCharge() {
  spdlog::info(
      "standby: ready; {} interface(s) loaded and checked, waiting to take them over "
      "(every {} ms it tries to claim them)",
      interfaces_, EngineOptions{}.standbyPoll.count());
  systemd_->tell("READY=1\nSTATUS=standby: waiting to take over " + std::to_string(interfaces_) +
                 " interface(s)");
  auto since = std::chrono::steady_clock::now();
  engine_->standBy([this, since](Status s) {
    if (!s) {
      StartFailure f = startFailureOf(s.error());
      if (f == StartFailure::Stranded)
        logErrorLines(s.error().message);
      else
        spdlog::error("standby: taking charge failed: {}", s.error().message);
      return requestStop(StopCause::Failed, f);
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - since)
                  .count();
    sayStarted("took over " + std::to_string(interfaces_) + " interface(s) after standing by " +
               std::to_string(ms) + " ms");
  });
}

int EngineProcess::run(config::Project project) {
  // libuv's pool does the file destinations' writes and fsyncs (and file
  // sources' reads). Its default 4 threads let 4 fsyncs overlap across every
  // destination; 16 measured 25 file destinations draining ~2x faster, while
  // 64 starved the database's own WAL flushes (ACKs fell 4x). Before the
  // first uv_queue_work: libuv reads it once. An operator's value wins.
  setenv("UV_THREADPOOL_SIZE", "16", 0);
  raiseOpenFileLimit();
  // Workers drop every capability whoever starts them (worker/confine.h),
  // but the supervisor itself keeps root's, and needs none of them.
  if (geteuid() == 0)
    spdlog::warn(
        "running as root: workers drop every capability, but the engine itself needs none; "
        "run it as its own user (the package's unit runs it as `ductus`)");
  // Before the first worker starts: they must not inherit systemd's sockets.
  systemd_ = Systemd::fromEnvironment();
  command_ = startCommandLine();
  if (!options_.dev) {
    auto takeover = Successor::fromEnvironment(*systemd_);
    if (!takeover) {
      spdlog::error("handover: {}", takeover.error().message);
      return exitCodeOf(StartFailure::Handover);
    }
    takeover_ = std::move(*takeover);
    if (takeover_ && options_.standby) {
      spdlog::error("handover: a standby engine takes no handover (it was refused one)");
      takeover_->failed("a standby engine takes no handover");
      return exitCodeOf(StartFailure::Handover);
    }
  }
  if (takeover_) systemd_->quiet();  // not systemd's main process yet
  systemd_->tell("STATUS=starting: loading the project's code");
  signal(SIGPIPE, SIG_IGN);
  // Signals only record; act() acts (nginx's ngx_signal_handler).
  sigterm_ = startSignal(&loop_, this, SIGTERM, onSignal);
  sigint_ = startSignal(&loop_, this, SIGINT, onSignal);
  stopTimer_ = makeTimer(&loop_, this);

  EngineOptions eo;
  eo.databaseUrl = options_.databaseUrl;
  eo.systemd = systemd_.get();
  eo.controlPath = options_.controlPath;
  eo.controlRequired = options_.controlRequired;
  // Another engine claimed an interface while this one's ownership lock was
  // lost: stop as for a signal, then exit kExitOwnedElsewhere, which the
  // unit's RestartPreventExitStatus keeps from restarting into the same
  // collision.
  eo.onOwnershipTaken = [this](const Error&) {
    spdlog::error("stopping: another engine owns this engine's interfaces now (exit {})",
                  exitCodeOf(StopCause::OwnershipTaken));
    requestStop(StopCause::OwnershipTaken);
  };
  // A standby hands nothing over: what it would hand is still being
  // taken (restart it instead).
  if (!options_.dev && !options_.standby)
    eo.handover = [this](auto answer) { startHandover(std::move(answer)); };
  eo.standby = options_.standby;
  if (takeover_) {
    auto from = takeover_->readFrom(HandoverTiming{}.from);
    if (!from) {
      spdlog::error("handover: {}", from.error().message);
      takeover_->failed(from.error().message);
      return exitCodeOf(StartFailure::Handover);
    }
    eo.takeover = true;
    eo.predecessor = *from;
    eo.inheritedSocket = [t = takeover_.get()](const std::string& name) {
      return t->takeSocket(name);
    };
  }
  // Workers run the binary this engine runs, held open: a package upgrade
  // renames a new /usr/bin/ductus over it, and a worker the old engine
  // restarts before its reload must speak the old engine's protocol. The
  // path /proc/self/fd/N is the held file even once its name is gone; N
  // above the workers' own descriptors (0-3), which their spawn dup2s over.
  selfBinary_ = Fd(open("/proc/self/exe", O_PATH | O_CLOEXEC));
  if (selfBinary_.valid()) {
    selfBinary_ = Fd(fcntl(selfBinary_.get(), F_DUPFD_CLOEXEC, 10));
    if (selfBinary_.valid()) eo.binary = "/proc/self/fd/" + std::to_string(selfBinary_.get());
  }
  t0_ = std::chrono::steady_clock::now();
  interfaces_ = project.interfaces.size();
  engine_ = std::make_unique<Engine>(&loop_, std::move(project), eo);
  engine_->start([this](Status s) {
    if (!s) return refuse(s.error());
    started_ = true;
    if (takeover_) return awaitRelease();
    if (options_.standby) return awaitCharge();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - t0_)
                  .count();
    sayStarted(std::to_string(interfaces_) + " interface(s) in " + std::to_string(ms) + " ms");
  });
  uv_run(&loop_, UV_RUN_DEFAULT);
  return exitCode_;
}

}  // namespace

int runEngineProcess(config::Project project, EngineProcessOptions options) {
  int code = 0;
  {
    EngineProcess process(std::move(options));
    code = process.run(std::move(project));
  }
  // SFTP sessions and SQL Server connections close on threads of their own
  // (their owners are gone); exit must not unload OpenSSL under them.
  if (!DetachedThreads::waitForAll(std::chrono::seconds(5)))
    spdlog::warn("exiting with {} SFTP or SQL Server connection(s) still closing",
                 DetachedThreads::running());
  return code;
}

int refuseStart(StartFailure f) {
  Systemd::fromEnvironment()->removeStored();
  return exitCodeOf(f);
}

}  // namespace ductus::supervisor
