#include "supervisor/workers/worker_process.h"

#include <sys/socket.h>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/fd.h"

namespace ductus::supervisor {
namespace {

// The largest write buffer kept for reuse.
constexpr size_t kSpareMaxBytes = 4u << 20;

// One uv_write and the bytes it writes; freed in its callback, which libuv
// calls even when the pipe is closed first (UV_ECANCELED).
struct WriteOp {
  uv_write_t req{};
  std::string data;
  std::weak_ptr<WorkerProcess*> owner;
};


}  // namespace

// What a worker's environment may hold: the time zone Date reads, the
// library path the binary may need, and the sanitizers' settings in the
// ASan build. Nothing of the engine's own configuration.
constexpr const char* kWorkerEnvironment[] = {"TZ", "LD_LIBRARY_PATH", "ASAN_OPTIONS",
                                               "UBSAN_OPTIONS", "LSAN_OPTIONS"};

Result<std::unique_ptr<WorkerProcess>> WorkerProcess::spawn(uv_loop_t* loop, const Options& options,
                                                            Events& events) {
  // A worker that dies (or is killed) leaves its socket closed; writing to
  // it must be an EPIPE the write callback handles, never a SIGPIPE that
  // kills the supervisor (or `ductus test`, or a test binary).
  std::signal(SIGPIPE, SIG_IGN);
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Error::fromErrno("socketpair() failed while spawning a worker");
  Fd ours(sv[0]), theirs(sv[1]);

  std::unique_ptr<WorkerProcess> w(new WorkerProcess(events));  // private constructor
  std::string heap = std::to_string(options.heapMb);
  std::string bin = options.binary;
  char a0[] = "worker", a2[] = "--fd", a3[] = "3", a4[] = "--heap-mb";
  char* args[] = {bin.data(), a0, a2, a3, a4, heap.data(), nullptr};
  // fd 0: nothing; 1 and 2: ours (the worker logs little, to stderr);
  // 3: its end of the socketpair (libuv dup2s it and clears CLOEXEC).
  // Ours are all close-on-exec, but uv_spawn closes nothing else: what the
  // shell that started the engine left open without it reaches the worker
  // too, which closes everything else first thing (worker/confine.h).
  uv_stdio_container_t stdio[4];
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_INHERIT_FD;
  stdio[1].data.fd = 1;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  stdio[3].flags = UV_INHERIT_FD;
  stdio[3].data.fd = theirs.get();
  // An environment of its own: the supervisor's holds the database URL and
  // may hold the secrets key, and a script that escaped V8 could read its
  // process's environment. Only what the runtime itself reads passes.
  std::vector<std::string> env;
  for (const char* name : kWorkerEnvironment)
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  uv_process_options_t po{};
  po.file = bin.c_str();
  po.args = args;
  po.env = envp.data();
  po.exit_cb = &WorkerProcess::onExitCb;
  po.stdio = stdio;
  po.stdio_count = 4;
  // A session of its own: Ctrl-C in the operator's terminal signals the
  // whole foreground process group, and the workers must stop when the
  // supervisor says so (after the delivery loops have flushed), not before.
  // A worker still exits when the supervisor dies: its socket closes.
  po.flags = UV_PROCESS_DETACHED;

  w->process_ = UvHandle<uv_process_t>::make();
  w->process_->data = w.get();
  int rc = uv_spawn(loop, w->process_.get(), &po);
  if (rc != 0) {
    // uv_spawn initializes the handle even when it fails: it must be closed.
    w->process_.markInitialized();
    return Error{"uv_spawn(" + bin + " worker) failed: " + uv_strerror(rc)};
  }
  w->process_.markInitialized();
  w->pid_ = w->process_->pid;
  theirs.reset();

  w->pipe_ = UvHandle<uv_pipe_t>::make();
  if (int r = uv_pipe_init(loop, w->pipe_.get(), 0); r != 0)
    return Error{std::string("uv_pipe_init failed: ") + uv_strerror(r)};
  w->pipe_.markInitialized();
  w->pipe_->data = w.get();
  if (int r = uv_pipe_open(w->pipe_.get(), ours.get()); r != 0)
    return Error{std::string("uv_pipe_open failed: ") + uv_strerror(r)};
  ours.release();  // the pipe handle closes it now
  w->flushSoon_ = UvHandle<uv_idle_t>::make();
  if (int r = uv_idle_init(loop, w->flushSoon_.get()); r != 0)
    return Error{std::string("uv_idle_init failed: ") + uv_strerror(r)};
  w->flushSoon_.markInitialized();
  w->flushSoon_->data = w.get();
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(w->pipe_.get()),
      [](uv_handle_t* h, size_t, uv_buf_t* buf) {
        auto* self = static_cast<WorkerProcess*>(h->data);
        if (!self) {
          buf->base = nullptr;
          buf->len = 0;
          return;
        }
        // Straight into the frame reader: frames are parsed where they land.
        auto space = self->reader_.space(proto::kReadBytes);
        buf->base = space.begin();
        buf->len = proto::kReadBytes;
      },
      [](uv_stream_t* s, ssize_t n, const uv_buf_t*) {
        auto* self = static_cast<WorkerProcess*>(s->data);
        if (self) self->onRead(n);
      });
  return w;
}

WorkerProcess::~WorkerProcess() {
  *self_ = nullptr;
  if (!exited_ && pid_ > 0 && process_) uv_process_kill(process_.get(), SIGKILL);
  // UvHandle closes both handles; the process handle's exit callback will
  // not run after its close (data is cleared first).
}

void WorkerProcess::flushSoon() {
  // An idle handle, not a check: it also keeps the loop from blocking in
  // poll first when the call was sent from a timer or before uv_run.
  if (!writing_ && flushSoon_ && !uv_is_active(reinterpret_cast<uv_handle_t*>(flushSoon_.get())))
    uv_idle_start(flushSoon_.get(), [](uv_idle_t* h) {
      uv_idle_stop(h);
      if (auto* self = static_cast<WorkerProcess*>(h->data)) self->flush();
    });
}

void WorkerProcess::flush() {
  if (writing_ || pending_.empty() || !pipe_) return;
  auto op = std::make_unique<WriteOp>();
  op->data.swap(pending_);
  pending_.swap(spare_);  // its capacity, kept from an earlier write
  op->owner = self_;
  uv_buf_t buf = uv_buf_init(op->data.data(), static_cast<unsigned>(op->data.size()));
  writingBytes_ = op->data.size();
  int rc = uv_write(&op->req, reinterpret_cast<uv_stream_t*>(pipe_.get()), &buf, 1,
                    [](uv_write_t* req, int status) {
                      std::unique_ptr<WriteOp> done(reinterpret_cast<WriteOp*>(req));
                      auto owner = done->owner.lock();
                      if (!owner || !*owner) return;
                      WorkerProcess* self = *owner;
                      self->writing_ = false;
                      self->writingBytes_ = 0;
                      done->data.clear();
                      // (Not a huge one: a 64 MB payload's buffer is let go.)
                      if (done->data.capacity() > self->spare_.capacity() &&
                          done->data.capacity() <= kSpareMaxBytes)
                        self->spare_.swap(done->data);
                      if (status != 0) {
                        self->kill(std::string("writing to the worker failed: ") +
                                   uv_strerror(status));
                        return;
                      }
                      self->flush();
                    });
  if (rc != 0) {
    writingBytes_ = 0;
    kill(std::string("writing to the worker failed: ") + uv_strerror(rc));
    return;
  }
  op.release();  // owned by the request until its callback
  writing_ = true;
}

void WorkerProcess::kill(const std::string& reason) {
  if (exited_) return;
  if (killReason_.empty()) killReason_ = "killed: " + reason;
  if (!readStopped_ && pipe_) {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(pipe_.get()));
    readStopped_ = true;
  }
  uv_process_kill(process_.get(), SIGKILL);
}

void WorkerProcess::onRead(ssize_t n) {
  if (n < 0) {
    // EOF or an error: the exit callback tells the rest.
    uv_read_stop(reinterpret_cast<uv_stream_t*>(pipe_.get()));
    readStopped_ = true;
    return;
  }
  reader_.commit(static_cast<size_t>(n));
  // The worker may be killed (and this object's state changed) by a frame's
  // handler; stop as soon as that happens.
  while (!readStopped_) {
    auto f = reader_.next();
    if (!f) return kill(f.error().message);
    if (!*f) break;
    auto msg = proto::decodeEvent(**f);
    if (!msg) return kill(msg.error().message);
    deliver(*msg);
  }
}

void WorkerProcess::deliver(proto::WorkerEvent& m) {
  if (std::holds_alternative<proto::Ready>(m)) {
    ready_ = true;
    events_.onReady(*this);
    return;
  }
  events_.onHeard(*this);
  std::visit(
      [&](const auto& x) {
        using M = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<M, proto::Loaded>) events_.onLoaded(*this, x);
        else if constexpr (std::is_same_v<M, proto::Outcome>) events_.onOutcome(*this, x);
        else if constexpr (std::is_same_v<M, proto::ServiceRequest>) events_.onService(*this, x);
        else if constexpr (std::is_same_v<M, proto::Log>) events_.onLog(*this, x);
        else if constexpr (std::is_same_v<M, proto::Pong>) events_.onPong(*this, x);
      },
      m);
}

void WorkerProcess::onExitCb(uv_process_t* p, int64_t status, int signal) {
  auto* self = static_cast<WorkerProcess*>(p->data);
  if (!self) return;
  // The worker's last frames (a heap overflow's outcomes, written just
  // before it exits) may still sit in the socket: read them first.
  uv_os_fd_t fd;
  if (!self->readStopped_ && self->pipe_ &&
      uv_fileno(reinterpret_cast<uv_handle_t*>(self->pipe_.get()), &fd) == 0) {
    for (;;) {
      auto space = self->reader_.space(proto::kReadBytes);
      ssize_t n = ::read(fd, space.begin(), proto::kReadBytes);
      if (n <= 0 || self->readStopped_) break;
      self->onRead(n);
    }
  }
  self->exited_ = true;
  if (!self->readStopped_ && self->pipe_) {
    uv_read_stop(reinterpret_cast<uv_stream_t*>(self->pipe_.get()));
    self->readStopped_ = true;
  }
  self->events_.onExit(*self, status, signal, self->killReason_);
}

}  // namespace ductus::supervisor
