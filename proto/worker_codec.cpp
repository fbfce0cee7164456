#include "proto/worker_codec.h"

#include <capnp/message.h>

#include <exception>
#include <type_traits>

#include "proto/worker.capnp.h"

namespace ductus::proto {
namespace {

// The plain enum is the wire's, number for number: the SDK is handed these
// numbers, and a decoded kind is passed on as it came.
template <OutcomeKind Plain, wire::OutcomeKind Wire>
constexpr bool sameNumber = static_cast<uint16_t>(Plain) == static_cast<uint16_t>(Wire);
static_assert(sameNumber<OutcomeKind::Output, wire::OutcomeKind::OUTPUT>);
static_assert(sameNumber<OutcomeKind::Filtered, wire::OutcomeKind::FILTERED>);
static_assert(sameNumber<OutcomeKind::Quarantine, wire::OutcomeKind::QUARANTINE>);
static_assert(sameNumber<OutcomeKind::Transient, wire::OutcomeKind::TRANSIENT>);
static_assert(sameNumber<OutcomeKind::RunawayTimeout, wire::OutcomeKind::RUNAWAY_TIMEOUT>);
static_assert(sameNumber<OutcomeKind::RunawayHeap, wire::OutcomeKind::RUNAWAY_HEAP>);

constexpr size_t W = sizeof(capnp::word);

kj::ArrayPtr<const capnp::byte> bytesOf(std::string_view s) {
  return kj::arrayPtr(reinterpret_cast<const capnp::byte*>(s.data()), s.size());
}
capnp::Text::Reader textOf(std::string_view s) { return capnp::Text::Reader(s.data(), s.size()); }

std::string_view viewOf(capnp::Data::Reader d) {
  return {reinterpret_cast<const char*>(d.begin()), d.size()};
}
std::string_view viewOf(capnp::Text::Reader t) { return {t.cStr(), t.size()}; }
std::string stringOf(capnp::Text::Reader t) { return {t.cStr(), t.size()}; }
// Up to the first NUL, as a C string reads it.
std::string_view cViewOf(capnp::Text::Reader t) { return std::string_view(t.cStr()); }

template <typename Root>
void append(std::string& out, size_t hintWords,
            kj::FunctionParam<void(typename Root::Builder)> fill) {
  appendFrame(out, hintWords, [&](capnp::MessageBuilder& b) { fill(b.initRoot<Root>()); });
}

Error malformed(std::string_view why) {
  return Error{"malformed frame: " + std::string(why), ErrorKind::Invalid};
}

// Runs a decoder: whatever the frame holds, an Error, never an exception.
template <typename T, typename F>
Result<T> guarded(F&& decode) {
  try {
    return decode();
  } catch (const kj::Exception& e) {
    return malformed(e.getDescription().cStr());
  } catch (const std::exception& e) {
    return malformed(e.what());
  }
}

void fillDb(wire::DbRequest::Builder d, std::string_view resource, std::string_view sql,
            std::string_view params) {
  d.setResource(textOf(resource));
  d.setSql(textOf(sql));
  d.setParamsJson(textOf(params));
}

}  // namespace

// ---- supervisor -> worker -------------------------------------------------------

void encode(std::string& out, const Load& m) {
  size_t bytes = m.name.size() + m.entry.size();
  for (auto& [specifier, source] : m.modules) bytes += specifier.size() + source.size() + 4 * W;
  for (auto& f : m.functions)
    bytes += f.exportName.size() + f.inputFormat.size() + f.outputFormat.size() +
             f.destination.size() + f.charset.size() + 16 * W;
  append<wire::ToWorker>(out, bytes / W + 64, [&](wire::ToWorker::Builder root) {
    auto l = root.initLoad();
    l.setInterfaceId(m.interfaceId);
    l.setName(textOf(m.name));
    l.setEntry(textOf(m.entry));
    auto mods = l.initModules(static_cast<unsigned>(m.modules.size()));
    unsigned i = 0;
    for (auto& [specifier, source] : m.modules) {
      mods[i].setSpecifier(textOf(specifier));
      mods[i].setSource(textOf(source));
      ++i;
    }
    auto fns = l.initFunctions(static_cast<unsigned>(m.functions.size()));
    for (unsigned k = 0; k < m.functions.size(); ++k) {
      const FunctionDef& f = m.functions[k];
      fns[k].setFunctionId(f.functionId);
      fns[k].setExportName(textOf(f.exportName));
      fns[k].setInputFormat(textOf(f.inputFormat));
      fns[k].setOutputFormat(textOf(f.outputFormat));
      fns[k].setDestination(textOf(f.destination));
      fns[k].setCharset(textOf(f.charset));
    }
    l.setTimeoutMs(static_cast<uint32_t>(m.timeout.count()));
  });
}

void encode(std::string& out, const Invoke& m) {
  size_t hint = (m.payload.size() + m.meta.destination.size()) / W + 32;
  append<wire::ToWorker>(out, hint, [&](wire::ToWorker::Builder root) {
    auto inv = root.initInvoke();
    inv.setCallId(m.callId);
    inv.setFunctionId(m.functionId);
    inv.setPayload(bytesOf(m.payload));
    auto meta = inv.initMeta();
    meta.setMessageId(m.meta.messageId);
    meta.setReceivedAtMs(m.meta.receivedAtMs);
    meta.setDestination(textOf(m.meta.destination));
    meta.setOriginId(m.meta.originId);
  });
}

void encode(std::string& out, const ServiceReply& m) {
  append<wire::ToWorker>(out, m.text.size() / W + 16, [&](wire::ToWorker::Builder root) {
    auto r = root.initServiceReply();
    r.setRequestId(m.requestId);
    if (m.ok) r.setOk(bytesOf(m.text));
    else r.setError(textOf(m.text));
  });
}

void encode(std::string& out, const RunTests& m) {
  append<wire::ToWorker>(out, 16, [&](wire::ToWorker::Builder root) {
    auto t = root.initRunTests();
    t.setCallId(m.callId);
    t.setInterfaceId(m.interfaceId);
  });
}

void encode(std::string& out, const Ping& m) {
  append<wire::ToWorker>(out, 8, [&](wire::ToWorker::Builder root) { root.setPing(m.value); });
}

void encode(std::string& out, const Shutdown&) {
  append<wire::ToWorker>(out, 8, [](wire::ToWorker::Builder root) { root.setShutdown(); });
}

void encode(std::string& out, const WorkerCommand& m) {
  std::visit([&](const auto& x) { encode(out, x); }, m);
}

// ---- worker -> supervisor -------------------------------------------------------

void encode(std::string& out, const Ready&) {
  append<wire::FromWorker>(out, 8, [](wire::FromWorker::Builder root) { root.setReady(); });
}

void encode(std::string& out, const Loaded& m) {
  size_t hint = (m.error ? m.error->size() : 0) / W + 64;
  append<wire::FromWorker>(out, hint, [&](wire::FromWorker::Builder root) {
    auto l = root.initLoaded();
    l.setInterfaceId(m.interfaceId);
    if (m.error) l.setError(textOf(*m.error));
    else l.setOk();
  });
}

void encode(std::string& out, const Outcome& m) {
  append<wire::FromWorker>(out, m.data.size() / W + 16, [&](wire::FromWorker::Builder root) {
    auto o = root.initOutcome();
    o.setCallId(m.callId);
    o.setKind(static_cast<wire::OutcomeKind>(static_cast<uint16_t>(m.kind)));
    o.setData(bytesOf(m.data));
  });
}

void encodeOutput(std::string& out, uint64_t callId, size_t size,
                  kj::FunctionParam<void(char*)> write) {
  append<wire::FromWorker>(out, size / W + 16, [&](wire::FromWorker::Builder root) {
    auto o = root.initOutcome();
    o.setCallId(callId);
    o.setKind(wire::OutcomeKind::OUTPUT);
    write(reinterpret_cast<char*>(o.initData(static_cast<unsigned>(size)).begin()));
  });
}

void encode(std::string& out, const ServiceRequest& m) {
  size_t bytes = std::visit(
      [](const auto& s) -> size_t {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, DbQuery> || std::is_same_v<S, DbExecute>)
          return s.resource.size() + s.sql.size() + s.paramsJson.size();
        else if constexpr (std::is_same_v<S, Fetch>)
          return s.url.size() + s.api.size() + s.initJson.size();
        else
          return s.name.size();
      },
      m.what);
  append<wire::FromWorker>(out, bytes / W + 32, [&](wire::FromWorker::Builder root) {
    auto s = root.initService();
    s.setRequestId(m.requestId);
    s.setCallId(m.callId);
    s.setTimeLeftMs(m.timeLeftMs);
    std::visit(
        [&](const auto& x) {
          using S = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<S, DbQuery>) {
            fillDb(s.initDbQuery(), x.resource, x.sql, x.paramsJson);
          } else if constexpr (std::is_same_v<S, DbExecute>) {
            fillDb(s.initDbExecute(), x.resource, x.sql, x.paramsJson);
          } else if constexpr (std::is_same_v<S, Fetch>) {
            auto f = s.initFetch();
            f.setUrl(textOf(x.url));
            f.setApi(textOf(x.api));
            f.setInitJson(textOf(x.initJson));
          } else if constexpr (std::is_same_v<S, Env>) {
            s.setEnv(textOf(x.name));
          } else {
            static_assert(std::is_same_v<S, Secret>);
            s.setSecret(textOf(x.name));
          }
        },
        m.what);
  });
}

void encode(std::string& out, const Log& m) {
  size_t hint = (m.level.size() + m.text.size()) / W + 16;
  append<wire::FromWorker>(out, hint, [&](wire::FromWorker::Builder root) {
    auto l = root.initLog();
    l.setCallId(m.callId);
    l.setLevel(textOf(m.level));
    l.setText(textOf(m.text));
  });
}

void encode(std::string& out, const Pong& m) {
  append<wire::FromWorker>(out, 8, [&](wire::FromWorker::Builder root) { root.setPong(m.value); });
}

void encode(std::string& out, const WorkerEvent& m) {
  std::visit([&](const auto& x) { encode(out, x); }, m);
}

// ---- decoding -------------------------------------------------------------------

Result<WorkerCommand> decodeCommand(Frame& frame) {
  return guarded<WorkerCommand>([&]() -> Result<WorkerCommand> {
    auto msg = frame.getRoot<wire::ToWorker>();
    switch (msg.which()) {
      case wire::ToWorker::LOAD: {
        auto l = msg.getLoad();
        Load m;
        m.interfaceId = l.getInterfaceId();
        m.name = stringOf(l.getName());
        m.entry = stringOf(l.getEntry());
        // A specifier named twice: the last source counts.
        for (auto mod : l.getModules())
          m.modules[stringOf(mod.getSpecifier())] = stringOf(mod.getSource());
        for (auto f : l.getFunctions()) {
          FunctionDef d;
          d.functionId = f.getFunctionId();
          d.exportName = stringOf(f.getExportName());
          d.inputFormat = stringOf(f.getInputFormat());
          d.outputFormat = stringOf(f.getOutputFormat());
          d.destination = stringOf(f.getDestination());
          d.charset = stringOf(f.getCharset());
          m.functions.push_back(std::move(d));
        }
        m.timeout = std::chrono::milliseconds(l.getTimeoutMs());
        return WorkerCommand(std::move(m));
      }
      case wire::ToWorker::INVOKE: {
        auto inv = msg.getInvoke();
        auto meta = inv.getMeta();
        return WorkerCommand(Invoke{inv.getCallId(), inv.getFunctionId(), viewOf(inv.getPayload()),
                                    CallMeta{meta.getMessageId(), meta.getReceivedAtMs(),
                                             stringOf(meta.getDestination()), meta.getOriginId()}});
      }
      case wire::ToWorker::SERVICE_REPLY: {
        auto r = msg.getServiceReply();
        if (r.isOk()) return WorkerCommand(ServiceReply{r.getRequestId(), true, viewOf(r.getOk())});
        return WorkerCommand(ServiceReply{r.getRequestId(), false, cViewOf(r.getError())});
      }
      case wire::ToWorker::RUN_TESTS: {
        auto t = msg.getRunTests();
        return WorkerCommand(RunTests{t.getCallId(), t.getInterfaceId()});
      }
      case wire::ToWorker::PING: return WorkerCommand(Ping{msg.getPing()});
      case wire::ToWorker::SHUTDOWN: return WorkerCommand(Shutdown{});
    }
    return malformed("an unknown message (" + std::to_string(static_cast<int>(msg.which())) + ")");
  });
}

Result<WorkerEvent> decodeEvent(Frame& frame) {
  return guarded<WorkerEvent>([&]() -> Result<WorkerEvent> {
    auto msg = frame.getRoot<wire::FromWorker>();
    switch (msg.which()) {
      case wire::FromWorker::READY: return WorkerEvent(Ready{});
      case wire::FromWorker::LOADED: {
        auto l = msg.getLoaded();
        Loaded m{l.getInterfaceId(), std::nullopt};
        if (l.isError()) m.error = stringOf(l.getError());
        return WorkerEvent(std::move(m));
      }
      case wire::FromWorker::OUTCOME: {
        auto o = msg.getOutcome();
        return WorkerEvent(Outcome{o.getCallId(),
                                   static_cast<OutcomeKind>(static_cast<uint16_t>(o.getKind())),
                                   viewOf(o.getData())});
      }
      case wire::FromWorker::SERVICE: {
        auto s = msg.getService();
        ServiceRequest m;
        m.requestId = s.getRequestId();
        m.callId = s.getCallId();
        m.timeLeftMs = s.getTimeLeftMs();
        switch (s.which()) {
          case wire::ServiceRequest::DB_QUERY: {
            auto d = s.getDbQuery();
            m.what = DbQuery{viewOf(d.getResource()), viewOf(d.getSql()), viewOf(d.getParamsJson())};
            break;
          }
          case wire::ServiceRequest::DB_EXECUTE: {
            auto d = s.getDbExecute();
            m.what =
                DbExecute{viewOf(d.getResource()), viewOf(d.getSql()), viewOf(d.getParamsJson())};
            break;
          }
          case wire::ServiceRequest::FETCH: {
            auto f = s.getFetch();
            m.what = Fetch{viewOf(f.getUrl()), viewOf(f.getApi()), viewOf(f.getInitJson())};
            break;
          }
          case wire::ServiceRequest::ENV: m.what = Env{viewOf(s.getEnv())}; break;
          case wire::ServiceRequest::SECRET: m.what = Secret{viewOf(s.getSecret())}; break;
          default:
            return malformed("an unknown service request (" +
                             std::to_string(static_cast<int>(s.which())) + ")");
        }
        return WorkerEvent(std::move(m));
      }
      case wire::FromWorker::LOG: {
        auto l = msg.getLog();
        return WorkerEvent(Log{l.getCallId(), cViewOf(l.getLevel()), cViewOf(l.getText())});
      }
      case wire::FromWorker::PONG: return WorkerEvent(Pong{msg.getPong()});
    }
    return malformed("an unknown message (" + std::to_string(static_cast<int>(msg.which())) + ")");
  });
}

}  // namespace ductus::proto
