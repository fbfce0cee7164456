// WorkerProcess: one `ductus worker` child, seen from the supervisor's libuv
// loop. Spawned with uv_spawn (so the exec error comes back synchronously and
// libuv reaps its own pid), the child's end of a Unix socketpair inherited as
// fd 3. It is the supervisor's end of the worker protocol: frames from the
// worker are read with proto::FrameReader, decoded (proto/worker_codec.h) and
// handed to Events as typed messages; a malformed or oversized frame kills
// the worker, never the supervisor. What it sends is encoded the same way. Writes are coalesced: one uv_write in flight at a time, the
// rest appended behind it.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "common/uv_handle.h"
#include "common/config/model.h"
#include "proto/frame.h"
#include "proto/worker_codec.h"
#include "proto/worker_messages.h"

namespace ductus::supervisor {

class WorkerProcess {
 public:
  struct Options {
    std::string binary;   // the ductus binary ("/proc/self/exe" in the engine)
    size_t heapMb = config::kDefaultHeapMb;  // isolates.heap_mb
  };

  class Events {
   public:
    virtual ~Events() = default;
    // One per message the worker sends, decoded whole first; its views
    // are valid during the call only. onHeard comes before each but
    // `ready` (the worker is alive and working).
    virtual void onReady(WorkerProcess& w) {}
    virtual void onHeard(WorkerProcess& w) {}
    virtual void onLoaded(WorkerProcess& w, const proto::Loaded& m) {}
    virtual void onOutcome(WorkerProcess& w, const proto::Outcome& m) {}
    virtual void onService(WorkerProcess& w, const proto::ServiceRequest& m) {}
    virtual void onLog(WorkerProcess& w, const proto::Log& m) {}
    virtual void onPong(WorkerProcess& w, const proto::Pong& m) {}
    // The process is gone (reaped). exitStatus/termSignal as libuv reports
    // them; why says what the supervisor did, if anything ("killed: ...").
    virtual void onExit(WorkerProcess& w, int64_t exitStatus, int termSignal,
                        const std::string& why) = 0;
  };

  static Result<std::unique_ptr<WorkerProcess>> spawn(uv_loop_t* loop, const Options& options,
                                                      Events& events);
  // Kills a still-running child (SIGKILL) and closes its handles.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Queues a message (proto::Load, Invoke, ServiceReply, RunTests, Ping,
  // Shutdown), built straight into the write queue: a call's payload is
  // copied once. Nothing is sent to a worker that is exiting or killed.
  template <typename Message>
  void send(const Message& m) {
    if (exited_ || killing()) return;  // a killed worker reads nothing more
    proto::encode(pending_, m);
    flushSoon();
  }
  // SIGKILL; onExit follows with why = reason.
  void kill(const std::string& reason);

  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }
  bool exited() const { return exited_; }
  // kill() was called: no new calls for it, its exit is on the way.
  bool killing() const { return !killReason_.empty(); }
  size_t queuedBytes() const { return pending_.size() + writingBytes_; }

 private:
  explicit WorkerProcess(Events& events) : events_(events) {}
  void flushSoon();
  void flush();
  // n bytes were read into reader_.space() (or EOF / an error when < 0).
  void onRead(ssize_t n);
  // One decoded message, to events_.
  void deliver(proto::WorkerEvent& m);
  static void onExitCb(uv_process_t* p, int64_t status, int signal);

  Events& events_;
  UvHandle<uv_process_t> process_;
  UvHandle<uv_pipe_t> pipe_;
  // Runs flush() on the loop's next turn: every call sent during this turn
  // (a whole read's transforms, the calls a batch of results let through)
  // goes out in one write, so the worker wakes once and reads them together.
  UvHandle<uv_idle_t> flushSoon_;
  bool writing_ = false;  // a uv_write is in flight
  size_t writingBytes_ = 0;
  std::string pending_;   // queued behind it
  std::string spare_;     // an empty buffer with room, for the next pending_
  proto::FrameReader reader_;
  pid_t pid_ = 0;
  bool ready_ = false;
  bool exited_ = false;
  bool readStopped_ = false;
  std::string killReason_;
  // A write completing after we are gone (its request owns its bytes)
  // finds this empty.
  std::shared_ptr<WorkerProcess*> self_ = std::make_shared<WorkerProcess*>(this);
};

}  // namespace ductus::supervisor
