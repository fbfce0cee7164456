// Handover: a running engine replaced by a new one (a new binary, new
// code, new configuration) without refusing a connection or losing a
// message (issue #21). `systemctl reload ductus` runs `ductus handover`,
// which asks the running engine over its control socket.
//
// The old engine starts the binary at the path it was started from (argv[0]
// made absolute at start: after a package upgrade /proc/self/exe is the
// deleted old file) with its arguments, a copy of every listening socket
// (MLLP, HTTP, the API's, the control socket) as fds 3, 4, ... named by
// DUCTUS_LISTEN_FDS / DUCTUS_LISTEN_FDNAMES as systemd names them, and one
// end of a socketpair as DUCTUS_TAKEOVER=fd. Over it, one JSON object a
// line ({"type": ...}):
//
//   old -> new  From      {"pid", "engine": its ownership id, "version"}
//   new -> old  Ready     prepared: code loaded, listening on the sockets
//   old -> new  Released  the old engine's loops stopped, claims released
//   new -> old  Running   claimed, reconciled, delivering
//   new -> old  Failed    {"reason"}, at any point; the new engine exits
//
// The new engine prepares (EngineOptions::takeover: its own ownership lock
// and engines row, no claim; delivery, files and schedules held) and
// listens on the inherited sockets beside the old one: both accept on them
// now and either may store. On Ready the old engine closes its listeners
// (what is in flight is answered; senders reconnect to the same socket,
// which the new engine serves), closes its gates, stops its loops,
// releases its claims, tells systemd MAINPID=<new> (no STOPPING=1, the
// stored sockets kept), says Released, and finishes its stop. The new one
// then claims, reconciles, reads the pauses and lets delivery go.
//
// Anything failing before Ready (a load error in the new code, a third
// engine owning an interface, no Ready within 60 s, the new process
// exiting) ends the new process and the old engine goes on as if nothing
// was asked: a deploy with broken code changes nothing.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/fd.h"
#include "common/result.h"
#include "common/uv_handle.h"

namespace ductus::supervisor {

class Engine;
class Systemd;

inline constexpr const char* kTakeoverVar = "DUCTUS_TAKEOVER";
inline constexpr const char* kListenFdsVar = "DUCTUS_LISTEN_FDS";
inline constexpr const char* kListenFdNamesVar = "DUCTUS_LISTEN_FDNAMES";

struct HandoverTiming {
  std::chrono::milliseconds ready{60'000};    // spawn to Ready
  std::chrono::milliseconds running{60'000};  // Released to Running
  std::chrono::milliseconds from{10'000};     // the new engine's wait for From
};

// The command line this process was started with, argv[0] made absolute
// (resolved against the working directory, or searched in PATH), read from
// /proc/self/cmdline. Read it at start: a handover runs the same.
std::vector<std::string> startCommandLine();

// The old engine's side: one handover at a time.
class Predecessor {
 public:
  struct Deps {
    uv_loop_t* loop = nullptr;
    Engine* engine = nullptr;
    Systemd* systemd = nullptr;  // null: nobody is told MAINPID
    std::vector<std::string> command;  // startCommandLine()
  };
  Predecessor(Deps deps, HandoverTiming timing = {});
  ~Predecessor();
  Predecessor(const Predecessor&) = delete;
  Predecessor& operator=(const Predecessor&) = delete;

  // Starts the new engine. `answer` hears the new engine's pid once it
  // runs, or why not; an error before Released leaves this engine running
  // as before. `exit` is called once this engine has handed over and
  // stopped (the process should exit with the code given: 0, or 1 when
  // the new engine failed after the point of no return).
  void start(std::function<void(Result<int64_t>)> answer, std::function<void(int)> exit);
  // Between start() and its answer.
  bool active() const { return phase_ != Phase::Idle && phase_ != Phase::Done; }

 private:
  enum class Phase { Idle, Preparing, Stopping, Released, Done };
  static void onTimer(uv_timer_t* t);
  void onLine(const std::string& line);
  void onChildExit(int64_t status, int signal);
  void onEof();
  // Before the old engine began to stop: the new one goes, this one stays.
  void abandon(const std::string& why);
  void send(const std::string& line);
  void maybeFinish();

  Deps deps_;
  HandoverTiming timing_;
  Phase phase_ = Phase::Idle;
  std::function<void(Result<int64_t>)> answer_;
  std::function<void(int)> exit_;
  UvHandle<uv_process_t> process_;
  UvHandle<uv_pipe_t> pipe_;
  UvHandle<uv_timer_t> timer_;
  UvHandle<uv_timer_t> killTimer_;
  std::vector<char> readBuffer_ = std::vector<char>(4096);
  std::string partial_;
  pid_t child_ = 0;
  bool childExited_ = false;
  bool engineStopped_ = false;
  std::optional<Result<int64_t>> outcome_;  // after Released: Running or the failure
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// The new engine's side.
class Successor {
 public:
  // A takeover when DUCTUS_TAKEOVER is set: the socketpair and the sockets
  // (close-on-exec from here; the variables removed so workers see none).
  // MLLP and HTTP ones go to `systemd` (Systemd::inherit), listened on as
  // LISTEN_FDS ones are; the API's and the control socket wait for
  // takeSocket(). Null when not a takeover; an error for variables that
  // don't make sense.
  static Result<std::unique_ptr<Successor>> fromEnvironment(Systemd& systemd);
  ~Successor();
  Successor(const Successor&) = delete;
  Successor& operator=(const Successor&) = delete;

  // Waits (blocking, before the loop runs) for the old engine's From: its
  // ownership id.
  Result<std::string> readFrom(std::chrono::milliseconds timeout);
  int64_t predecessorPid() const { return predecessorPid_; }
  // The inherited socket `name` (now the caller's), or -1.
  int takeSocket(const std::string& name);

  void ready();
  void running();
  void failed(const std::string& reason);
  // From Ready on: `released` on Released; `lost` when the old engine goes
  // away (or says something else) before it.
  void watch(uv_loop_t* loop, std::function<void()> released, std::function<void()> lost);

 private:
  explicit Successor(Fd pair) : pair_(std::move(pair)) {}
  void send(const std::string& line);

  Fd pair_;
  std::vector<std::pair<std::string, Fd>> sockets_;
  int64_t predecessorPid_ = 0;
  std::string partial_;
  UvHandle<uv_poll_t> poll_;
  std::function<void()> released_, lost_;
  bool done_ = false;
};

}  // namespace ductus::supervisor
