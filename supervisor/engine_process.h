// EngineProcess: `ductus run`'s process around its Engine
// (supervisor/engine.h). It owns the libuv loop and the handles on it (the
// signals, the stop timer), starts the engine (a handover's new engine:
// prepares it, then takes charge once the old one released), says the
// "started" line and READY=1 once, answers a handover request, and stops.
//
// A stop is asked from several places: SIGTERM/SIGINT, another engine
// taking an interface while the ownership lock was lost, a takeover that
// fails after it prepared. As nginx's master process does with its signal
// flags, each only records the request (StopRequests) and one function
// acts on what was recorded: the first request begins the stop and its
// --stop-timeout, a later one changes at most the exit code, and only a
// second signal exits at once.
//
// Every exit code comes from exitCodeOf(): 0 after a clean stop or a
// handover, 3 (kExitOwnedElsewhere) when another live engine owns one of
// the interfaces (at start, or later), 2 (kUsageError) without a database,
// 1 for every other failed start and for a stop cut short.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/config/model.h"
#include "common/result.h"

namespace ductus::supervisor {

class Engine;

// Why a start failed: each has its exit code (exitCodeOf) and its lines.
enum class StartFailure {
  InvalidProject,  // the project has errors, or kinds this engine can't run
  NoDatabase,      // no --database, no database: in ductus.yaml, no DUCTUS_DATABASE_URL
  Handover,        // a takeover's socket pair, its From, or the old engine gone
  Code,            // an interface's code does not load
  OwnedElsewhere,  // another live engine owns one of the interfaces
  Stranded,        // lowered ordering.partitions would strand pending messages
  Other,           // the database, a listener, the control socket, ...
};

// The engine's start error, by its kind.
StartFailure startFailureOf(const Error& e);

// Why the process stops.
enum class StopCause {
  Signal,          // SIGTERM or SIGINT: a clean stop exits 0
  OwnershipTaken,  // another engine claimed an interface while the lock was lost
  Failed,          // a takeover that failed after it prepared: its StartFailure
  CutShort,        // past --stop-timeout, or a second signal: exit without the stop
};

// The one place an exit code is decided.
int exitCodeOf(StartFailure f);
int exitCodeOf(StopCause c, std::optional<StartFailure> f = std::nullopt);

// The stops asked so far (the pending-stop field): the signal handlers and
// the engine's callbacks record, and EngineProcess acts on take()'s answer
// in one place.
class StopRequests {
 public:
  enum class Action {
    Nothing,    // nothing new, or a stop under way already covers it
    BeginStop,  // the first request: stop, with --stop-timeout running
    ExitNow,    // a second signal: exit without waiting for the stop
  };
  // Records a request; `failure` goes with StopCause::Failed. Acts on none.
  void record(StopCause cause, std::optional<StartFailure> failure = std::nullopt);
  // What was recorded since the last call asks for; each once.
  Action take();
  // Whether any stop was asked, and any signal.
  bool asked() const { return begun_; }
  bool signalled() const { return signals_ > 0; }
  // The exit code once the stop finished, and when it is cut short.
  int exitCode() const { return exitCode_; }
  int cutShortExitCode() const { return exitCode_ ? exitCode_ : exitCodeOf(StopCause::CutShort); }

 private:
  bool begun_ = false;
  int signals_ = 0;
  int exitCode_ = 0;
  Action pending_ = Action::Nothing;
};

struct EngineProcessOptions {
  std::string databaseUrl;
  std::chrono::milliseconds stopTimeout{30'000};
  // The control socket for ductusctl (EngineOptions::controlPath); required:
  // a failure to open it fails the start (--control given).
  std::string controlPath;
  bool controlRequired = false;
  // ductus dev: no handover, either way.
  bool dev = false;
  // ductus run --standby (EngineOptions::standby): READY=1 once prepared,
  // "started:" once it has taken charge. No handover while standing by.
  bool standby = false;
  // Once started, after the "started" line and READY=1 (ductus dev's banner).
  std::function<void(const Engine&)> onStarted;
};

// Runs the engine on `project` until it stops; the exit code. Blocks:
// the whole life of `ductus run` after its flags and project are read.
int runEngineProcess(config::Project project, EngineProcessOptions options);

// A start refused before the engine exists (a project with errors, no
// database): systemd's stored sockets would queue connections for an
// engine that isn't coming, so they are removed. f's exit code.
int refuseStart(StartFailure f);

}  // namespace ductus::supervisor
