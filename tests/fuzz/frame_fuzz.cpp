// The worker frame reader and decoder: proto/frame.h's FrameReader with the
// limits the supervisor uses, fed the input (a worker's byte stream) in
// pieces of random sizes, half of them through space()/commit() as the
// supervisor's socket reads go, half through feed(). Every frame it yields
// is decoded as the supervisor does (proto::decodeEvent, as
// supervisor/workers/worker_process.cpp): every field, texts and data read;
// an Error ends the stream (the supervisor kills that worker), as does an
// Error from next().
//
// Checked beyond the sanitizers: nothing escapes a decode (an exception
// would end the fuzzer uncaught); space() gives the room asked for;
// bufferedBytes() never exceeds what was fed.
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <variant>

#include "proto/frame.h"
#include "proto/worker_codec.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace ductus;

// Reads every field of a decoded message; returns a sum of what it read, so
// nothing is optimised away.
size_t readEvent(const proto::WorkerEvent& event) {
  return std::visit(
      [](const auto& m) -> size_t {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, proto::Loaded>) {
          return m.interfaceId + (m.error ? m.error->size() : 1);
        } else if constexpr (std::is_same_v<M, proto::Outcome>) {
          return m.callId + static_cast<size_t>(m.kind) + std::string(m.data).size();
        } else if constexpr (std::is_same_v<M, proto::ServiceRequest>) {
          size_t n = m.requestId + m.callId + m.timeLeftMs;
          std::visit(
              [&](const auto& s) {
                using S = std::decay_t<decltype(s)>;
                if constexpr (std::is_same_v<S, proto::Fetch>)
                  n += std::string(s.url).size() + s.api.size() + s.initJson.size();
                else if constexpr (std::is_same_v<S, proto::Env> || std::is_same_v<S, proto::Secret>)
                  n += std::string(s.name).size();
                else
                  n += std::string(s.resource).size() + s.sql.size() + s.paramsJson.size();
              },
              m.what);
          return n;
        } else if constexpr (std::is_same_v<M, proto::Log>) {
          return m.callId + m.level.size() + std::string(m.text).size();
        } else if constexpr (std::is_same_v<M, proto::Pong>) {
          return m.value;
        } else {
          return 0;
        }
      },
      event);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  fuzz::Rng rng(input);
  proto::FrameReader reader;  // the supervisor's limits
  size_t fed = 0;
  volatile size_t sink = 0;
  for (std::string_view piece : fuzz::split(input, rng, 64)) {
    if (piece.empty()) continue;
    if (rng.below(2)) {
      reader.feed(piece.data(), piece.size());
    } else {
      // A socket read: room for a whole read (or just this piece), filled in part.
      auto space = reader.space(rng.below(4) == 0 ? proto::kReadBytes : piece.size());
      FUZZ_CHECK(space.size() >= piece.size(), "space() gave less room than asked");
      std::memcpy(space.begin(), piece.data(), piece.size());
      reader.commit(piece.size());
    }
    fed += piece.size();
    FUZZ_CHECK(reader.bufferedBytes() <= fed, "more bytes buffered than fed");
    for (;;) {
      auto f = reader.next();
      if (!f) return 0;  // the supervisor kills the worker: nothing more is read
      if (!*f) break;
      auto event = proto::decodeEvent(**f);
      if (!event) return 0;  // a malformed frame: the worker is killed
      sink = sink + readEvent(*event);
    }
  }
  return 0;
}
