#include "worker/worker_loop.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>

#include <capnp/serialize.h>
#include <kj/io.h>

#include "proto/frame.h"
#include "proto/worker.capnp.h"
#include "proto/worker_exit.h"
#include "worker/confine.h"
#include "worker/script_host.h"
#include "worker/v8_isolate.h"
#include "worker/v8_platform.h"

namespace ductus::worker {
namespace {

kj::ArrayPtr<const capnp::byte> bytesOf(std::string_view s) {
  return kj::arrayPtr(reinterpret_cast<const capnp::byte*>(s.data()), s.size());
}

capnp::Text::Reader textOf(std::string_view s) { return capnp::Text::Reader(s.data(), s.size()); }

// Collects outgoing frames; flush() writes them in one go after each batch
// of incoming frames, so pipelined calls cost one write per batch.
class FrameOutput : public HostOutput {
 public:
  // The supervisor refuses a frame over its limit (and this worker with
  // it), so the call would be retried forever: an output that big is the
  // script's mistake, for a person to see.
  static constexpr size_t kMaxOutputBytes = proto::FrameLimits{}.maxMessageBytes - (1u << 20);

  explicit FrameOutput(int fd) : fd_(fd) {}

  void ready() {
    append(8, [](capnp::MessageBuilder& b) { b.initRoot<proto::FromWorker>().setReady(); });
  }
  void pong(uint64_t v) {
    append(8, [&](capnp::MessageBuilder& b) { b.initRoot<proto::FromWorker>().setPong(v); });
  }
  void loaded(uint32_t interfaceId, const Status& result) override {
    append(64, [&](capnp::MessageBuilder& b) {
      auto l = b.initRoot<proto::FromWorker>().initLoaded();
      l.setInterfaceId(interfaceId);
      if (result) l.setOk();
      else l.setError(result.error().message);
    });
  }
  void outcome(uint64_t callId, OutcomeKind kind, std::string_view data) override {
    std::string tooBig;
    if (data.size() > kMaxOutputBytes) {
      tooBig = "the output is " + std::to_string(data.size()) +
               " bytes; a call may return at most " + std::to_string(kMaxOutputBytes);
      kind = OutcomeKind::QUARANTINE;
      data = tooBig;
    }
    append(data.size() / sizeof(capnp::word) + 16, [&](capnp::MessageBuilder& b) {
      auto o = b.initRoot<proto::FromWorker>().initOutcome();
      o.setCallId(callId);
      o.setKind(kind);
      o.setData(bytesOf(data));
    });
  }
  void output(uint64_t callId, size_t size, kj::FunctionParam<void(char*)> write) override {
    if (size > kMaxOutputBytes) return HostOutput::output(callId, size, write);  // refused there
    append(size / sizeof(capnp::word) + 16, [&](capnp::MessageBuilder& b) {
      auto o = b.initRoot<proto::FromWorker>().initOutcome();
      o.setCallId(callId);
      o.setKind(OutcomeKind::OUTPUT);
      write(reinterpret_cast<char*>(o.initData(static_cast<unsigned>(size)).begin()));
    });
  }
  void service(uint64_t requestId, uint64_t callId, ServiceKind kind, std::string_view a,
               std::string_view b2, std::string_view c, uint32_t timeLeftMs) override {
    size_t hint = (a.size() + b2.size() + c.size()) / sizeof(capnp::word) + 32;
    append(hint, [&](capnp::MessageBuilder& b) {
      auto s = b.initRoot<proto::FromWorker>().initService();
      s.setRequestId(requestId);
      s.setCallId(callId);
      s.setTimeLeftMs(timeLeftMs);
      switch (kind) {
        case ServiceKind::DbQuery:
        case ServiceKind::DbExecute: {
          auto d = kind == ServiceKind::DbQuery ? s.initDbQuery() : s.initDbExecute();
          d.setResource(textOf(a));
          d.setSql(textOf(b2));
          d.setParamsJson(textOf(c));
          break;
        }
        case ServiceKind::Fetch: {
          auto f = s.initFetch();
          f.setUrl(textOf(a));
          f.setApi(textOf(b2));
          f.setInitJson(textOf(c));
          break;
        }
        case ServiceKind::Env: s.setEnv(textOf(a)); break;
        case ServiceKind::Secret: s.setSecret(textOf(a)); break;
      }
    });
  }
  void log(uint64_t callId, std::string_view level, std::string_view text) override {
    append((level.size() + text.size()) / sizeof(capnp::word) + 16, [&](capnp::MessageBuilder& b) {
      auto l = b.initRoot<proto::FromWorker>().initLog();
      l.setCallId(callId);
      l.setLevel(textOf(level));
      l.setText(textOf(text));
    });
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
  // Built in place behind the frames already waiting for flush().
  void append(size_t hintWords, kj::FunctionParam<void(capnp::MessageBuilder&)> fill) {
    proto::appendFrame(buf_, hintWords, fill);
  }
  int fd_;
  std::string buf_;
};

std::string_view viewOf(capnp::Data::Reader d) {
  return {reinterpret_cast<const char*>(d.begin()), d.size()};
}

// How long answers may wait in the buffer while a read's calls run.
constexpr auto kFlushEvery = std::chrono::milliseconds(10);

// False when the worker should stop (shutdown).
bool dispatch(ScriptHost& host, FrameOutput& out, proto::ToWorker::Reader msg) {
  switch (msg.which()) {
    case proto::ToWorker::LOAD: {
      auto l = msg.getLoad();
      InterfaceDef def;
      def.interfaceId = l.getInterfaceId();
      def.name = l.getName();
      def.entry = l.getEntry();
      for (auto m : l.getModules()) def.modules[m.getSpecifier()] = m.getSource();
      for (auto f : l.getFunctions())
        def.functions.push_back({f.getFunctionId(), f.getExportName(), f.getInputFormat(),
                                 f.getOutputFormat(), f.getCharset()});
      def.timeout = std::chrono::milliseconds(l.getTimeoutMs() ? l.getTimeoutMs() : 5000);
      (void)host.load(def);
      return true;
    }
    case proto::ToWorker::INVOKE: {
      auto inv = msg.getInvoke();
      auto m = inv.getMeta();
      CallMeta meta{m.getMessageId(), m.getReceivedAtMs(), m.getDestination(), m.getOriginId()};
      host.invoke(inv.getCallId(), inv.getFunctionId(), viewOf(inv.getPayload()), meta);
      return true;
    }
    case proto::ToWorker::SERVICE_REPLY: {
      auto r = msg.getServiceReply();
      if (r.isOk()) host.serviceReply(r.getRequestId(), true, viewOf(r.getOk()));
      else host.serviceReply(r.getRequestId(), false, std::string_view(r.getError().cStr()));
      return true;
    }
    case proto::ToWorker::RUN_TESTS: {
      auto t = msg.getRunTests();
      host.runTests(t.getCallId(), t.getInterfaceId());
      return true;
    }
    case proto::ToWorker::PING: out.pong(msg.getPing()); return true;
    case proto::ToWorker::SHUTDOWN: return false;
  }
  return true;
}

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
        try {
          if (!dispatch(**host, out, (*f)->getRoot<proto::ToWorker>())) {
            out.flush();
            return proto::kExitDone;
          }
        } catch (const kj::Exception& e) {
          std::fprintf(stderr, "worker: malformed frame: %s\n", e.getDescription().cStr());
          return proto::kExitBroken;
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
