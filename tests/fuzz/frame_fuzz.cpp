// The worker frame reader: proto/frame.h's FrameReader with the limits the
// supervisor uses, fed the input (a worker's byte stream) in pieces of
// random sizes, half of them through space()/commit() as the supervisor's
// socket reads go, half through feed(). Every frame it yields is read as
// proto::FromWorker the way the supervisor does (supervisor/workers/
// worker_process.cpp, worker_pool.cpp): every field, texts and data copied
// out, a kj::Exception caught and taken as a malformed frame, which ends the
// stream (the supervisor kills that worker), as does an Error from next().
//
// Checked beyond the sanitizers: nothing but kj::Exception escapes a read
// (anything else would end the fuzzer as an uncaught exception); space()
// gives the room asked for; bufferedBytes() never exceeds what was fed.
#include <capnp/message.h>
#include <kj/exception.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "proto/frame.h"
#include "proto/worker.capnp.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace ductus;

// Reads every field of a frame; returns a sum of what it read, so nothing is
// optimised away.
size_t readFromWorker(proto::FromWorker::Reader msg) {
  size_t n = 0;
  switch (msg.which()) {
    case proto::FromWorker::READY:
      break;
    case proto::FromWorker::LOADED: {
      auto l = msg.getLoaded();
      n += l.getInterfaceId();
      if (l.isError()) {
        std::string error = l.getError();
        n += error.size();
      } else if (l.isOk()) {
        n += 1;
      }
      break;
    }
    case proto::FromWorker::OUTCOME: {
      auto o = msg.getOutcome();
      n += o.getCallId();
      n += static_cast<size_t>(o.getKind());
      auto d = o.getData();
      std::string data(reinterpret_cast<const char*>(d.begin()), d.size());
      n += data.size();
      break;
    }
    case proto::FromWorker::SERVICE: {
      auto s = msg.getService();
      n += s.getRequestId() + s.getCallId();
      switch (s.which()) {
        case proto::ServiceRequest::DB_QUERY:
        case proto::ServiceRequest::DB_EXECUTE: {
          auto d = s.isDbQuery() ? s.getDbQuery() : s.getDbExecute();
          std::string resource = d.getResource(), sql = d.getSql(), params = d.getParamsJson();
          n += resource.size() + sql.size() + params.size();
          break;
        }
        case proto::ServiceRequest::FETCH: {
          auto f = s.getFetch();
          std::string url = f.getUrl(), api = f.getApi(), init = f.getInitJson();
          n += url.size() + api.size() + init.size();
          break;
        }
        case proto::ServiceRequest::ENV: {
          std::string name = s.getEnv();
          n += name.size();
          break;
        }
        case proto::ServiceRequest::SECRET: {
          std::string name = s.getSecret();
          n += name.size();
          break;
        }
      }
      break;
    }
    case proto::FromWorker::LOG: {
      auto l = msg.getLog();
      n += l.getCallId();
      std::string level = l.getLevel();
      n += level.size() + std::strlen(l.getText().cStr());
      break;
    }
    case proto::FromWorker::PONG:
      n += msg.getPong();
      break;
  }
  return n;
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
      try {
        auto msg = (*f)->getRoot<proto::FromWorker>();
        sink = sink + readFromWorker(msg);
      } catch (const kj::Exception&) {
        return 0;  // a malformed frame: the worker is killed
      }
    }
  }
  return 0;
}
