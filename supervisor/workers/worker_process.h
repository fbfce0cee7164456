// WorkerProcess: one `ductus worker` child, seen from the supervisor's libuv
// loop. Spawned with uv_spawn (so the exec error comes back synchronously and
// libuv reaps its own pid), the child's end of a Unix socketpair inherited as
// fd 3. Frames from the worker are read with proto::FrameReader and handed to
// Events; a malformed or oversized frame kills the worker, never the
// supervisor. Writes are coalesced: one uv_write in flight at a time, the
// rest appended behind it.
#pragma once

#include <sys/types.h>
#include <uv.h>

#include <capnp/message.h>

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "common/uv_handle.h"
#include "proto/frame.h"
#include "proto/worker.capnp.h"

namespace ductus::supervisor {

class WorkerProcess {
 public:
  struct Options {
    std::string binary;   // the ductus binary ("/proc/self/exe" in the engine)
    size_t heapMb = 256;  // isolates.heap_mb
  };

  class Events {
   public:
    virtual ~Events() = default;
    // Every frame but `ready` (which only sets ready()). May throw
    // kj::Exception on a malformed message: the worker is then killed.
    virtual void onFrame(WorkerProcess& w, proto::FromWorker::Reader msg) = 0;
    virtual void onReady(WorkerProcess& w) {}
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

  void send(capnp::MessageBuilder& message);
  // The same, with the message built straight into the write queue (see
  // proto::appendFrame): for calls, whose payloads are the bulk of the bytes.
  void send(size_t hintWords, kj::FunctionParam<void(capnp::MessageBuilder&)> fill);
  // SIGKILL; onExit follows with why = reason.
  void kill(const std::string& reason);

  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }
  bool exited() const { return exited_; }
  // kill() was called: no new calls for it, its exit is on the way.
  bool killing() const { return !killReason_.empty(); }
  size_t queuedBytes() const { return pending_.size() + writingBytes_; }

 private:
  WorkerProcess(uv_loop_t* loop, Events& events) : loop_(loop), events_(events) {}
  void flushSoon();
  void flush();
  // n bytes were read into reader_.space() (or EOF / an error when < 0).
  void onRead(ssize_t n);
  static void onExitCb(uv_process_t* p, int64_t status, int signal);

  uv_loop_t* loop_;
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
