#include "worker/worker_loop.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <variant>

#include "proto/frame.h"
#include "proto/worker_codec.h"
#include "proto/worker_exit.h"
#include "worker/confine.h"
#include "worker/script_host.h"
#include "worker/v8_isolate.h"
#include "worker/v8_platform.h"

namespace ductus::worker {
namespace {

// Collects outgoing frames; flush() writes them in one go after each batch
// of incoming frames, so pipelined calls cost one write per batch.
class FrameOutput : public HostOutput {
 public:
  // The supervisor refuses a frame over its limit (and this worker with
  // it), so the call would be retried forever: an output that big is the
  // script's mistake, for a person to see.
  static constexpr size_t kMaxOutputBytes = proto::FrameLimits{}.maxMessageBytes - (1u << 20);

  explicit FrameOutput(int fd) : fd_(fd) {}

  void ready() { proto::encode(buf_, proto::Ready{}); }
  void pong(uint64_t v) { proto::encode(buf_, proto::Pong{v}); }
  void loaded(uint32_t interfaceId, const Status& result) override {
    proto::Loaded l{interfaceId, std::nullopt};
    if (!result) l.error = result.error().message;
    proto::encode(buf_, l);
  }
  void outcome(uint64_t callId, OutcomeKind kind, std::string_view data) override {
    std::string tooBig;
    if (data.size() > kMaxOutputBytes) {
      tooBig = "the output is " + std::to_string(data.size()) +
               " bytes; a call may return at most " + std::to_string(kMaxOutputBytes);
      kind = OutcomeKind::Quarantine;
      data = tooBig;
    }
    proto::encode(buf_, proto::Outcome{callId, kind, data});
  }
  void output(uint64_t callId, size_t size, kj::FunctionParam<void(char*)> write) override {
    if (size > kMaxOutputBytes) return HostOutput::output(callId, size, write);  // refused there
    proto::encodeOutput(buf_, callId, size, write);
  }
  void service(const proto::ServiceRequest& request) override { proto::encode(buf_, request); }
  void log(uint64_t callId, std::string_view level, std::string_view text) override {
    proto::encode(buf_, proto::Log{callId, level, text});
  }

  // False when the supervisor is gone.
  bool pending() const { return !buf_.empty(); }

  bool flush() {
    size_t off = 0;
    while (off < buf_.size()) {
      ssize_t n = ::write(fd_, buf_.data() + off, buf_.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    buf_.clear();
    if (buf_.capacity() > (4u << 20)) buf_.shrink_to_fit();  // after a huge output
    return true;
  }

 private:
  int fd_;
  std::string buf_;  // frames built in place, waiting for flush()
};

// How long answers may wait in the buffer while a read's calls run.
constexpr auto kFlushEvery = std::chrono::milliseconds(10);

// One decoded command, done. False when the worker should stop (shutdown).
struct Dispatch {
  ScriptHost& host;
  FrameOutput& out;

  bool operator()(proto::Load& l) {
    if (l.timeout.count() == 0) l.timeout = proto::kDefaultLoadTimeout;
    (void)host.load(l);
    return true;
  }
  bool operator()(const proto::Invoke& i) {
    host.invoke(i.callId, i.functionId, i.payload, i.meta);
    return true;
  }
  bool operator()(const proto::ServiceReply& r) {
    host.serviceReply(r.requestId, r.ok, r.text);
    return true;
  }
  bool operator()(const proto::RunTests& t) {
    host.runTests(t.callId, t.interfaceId);
    return true;
  }
  bool operator()(const proto::Ping& p) {
    out.pong(p.value);
    return true;
  }
  bool operator()(const proto::Shutdown&) { return false; }
};

}  // namespace

int serveWorker(const char* argv0, int fd, size_t heapMb) {
  if (auto s = initV8(argv0); !s) {
    std::fprintf(stderr, "worker: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  auto iso = Isolate::create(heapMb << 20);
  if (!iso) {
    std::fprintf(stderr, "worker: %s\n", iso.error().message.c_str());
    return proto::kExitBroken;
  }
  FrameOutput out(fd);
  auto host = ScriptHost::create((*iso)->get(), out);
  if (!host) {
    std::fprintf(stderr, "worker: %s\n", host.error().message.c_str());
    return proto::kExitBroken;
  }
  // The address space: V8's heap plus code space, stacks and the
  // allocator's slack. The heap limit, not this, stops a heap bomb.
  size_t addressSpace = (heapMb * 4 + 2048) * (size_t{1} << 20);
  // Again, in case starting V8 left one open: none is needed from here on.
  if (auto s = closeDescriptorsExcept(fd); !s) {
    std::fprintf(stderr, "worker: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  if (auto s = confineProcess({addressSpace}); !s) {
    std::fprintf(stderr, "worker: confining failed: %s\n", s.error().message.c_str());
    return proto::kExitBroken;
  }
  out.ready();
  if (!out.flush()) return proto::kExitDone;

  proto::FrameReader reader;
  auto lastFlush = ScriptHost::Clock::now();
  for (;;) {
    int timeoutMs = -1;
    auto next = (*host)->nextDeadline();
    if (next != ScriptHost::Clock::time_point::max()) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - ScriptHost::Clock::now());
      timeoutMs = static_cast<int>(std::max<int64_t>(0, ms.count() + 1));
    }
    pollfd p{fd, POLLIN, 0};
    int pr = ::poll(&p, 1, timeoutMs);
    if (pr < 0 && errno != EINTR) return proto::kExitBroken;
    if (pr > 0) {
      // Straight into the frame reader: frames are parsed where they land.
      ssize_t n = ::read(fd, reader.space(proto::kReadBytes).begin(), proto::kReadBytes);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return proto::kExitDone;  // the supervisor is gone
      reader.commit(static_cast<size_t>(n));
      for (;;) {
        auto f = reader.next();
        if (!f) {
          std::fprintf(stderr, "worker: %s\n", f.error().message.c_str());
          return proto::kExitBroken;
        }
        if (!*f) break;
        auto command = proto::decodeCommand(**f);
        if (!command) {
          std::fprintf(stderr, "worker: %s\n", command.error().message.c_str());
          return proto::kExitBroken;
        }
        if (!std::visit(Dispatch{**host, out}, *command)) {
          out.flush();
          return proto::kExitDone;
        }
        if ((*host)->mustExit()) break;
        // A read may carry hundreds of calls: their answers go out as they
        // are ready, not after the last one, so the supervisor hears that
        // this worker makes progress (its runaway deadline counts from
        // the worker's last word) and delivery starts early.
        if (out.pending() && ScriptHost::Clock::now() - lastFlush >= kFlushEvery) {
          if (!out.flush()) return proto::kExitDone;
          lastFlush = ScriptHost::Clock::now();
        }
      }
    }
    (*host)->expireOverdue(ScriptHost::Clock::now());
    if (!out.flush()) return proto::kExitDone;
    lastFlush = ScriptHost::Clock::now();
    if ((*host)->mustExit()) return proto::kExitHeapOverflow;
  }
}

}  // namespace ductus::worker
