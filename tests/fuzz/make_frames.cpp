// Writes the starting corpus of the frame target (corpus/frame/): worker -> supervisor
// byte streams built the way worker/worker_loop.cpp builds its frames
// (proto::appendFrame into one buffer), one kind of frame per file, a
// pipelined batch, and a message spread over several segments.
//
//   fuzz_make_frames tests/fuzz/corpus/frame
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>

#include "proto/frame.h"
#include "proto/worker.capnp.h"

namespace {

using namespace ductus;

capnp::Data::Reader bytesOf(std::string_view s) {
  return {reinterpret_cast<const capnp::byte*>(s.data()), s.size()};
}
capnp::Text::Reader textOf(std::string_view s) {
  // Text must be NUL-terminated: the callers pass literals.
  return {s.data(), s.size()};
}

using Fill = std::function<void(proto::wire::FromWorker::Builder)>;

void append(std::string& out, size_t hintWords, const Fill& fill) {
  proto::appendFrame(out, hintWords, [&](capnp::MessageBuilder& b) { fill(b.initRoot<proto::wire::FromWorker>()); });
}

const char* const kHl7 =
    "MSH|^~\\&|LAB|HOSP|DUCTUS|ENGINE|20260101120000||ADT^A01^ADT_A01|MSG1|P|2.5\r"
    "PID|1||12345^^^HOSP^MR||DOE^JANE\r";

const Fill kReady = [](auto w) { w.setReady(); };
const Fill kPong = [](auto w) { w.setPong(42); };
const Fill kLoadedOk = [](auto w) {
  auto l = w.initLoaded();
  l.setInterfaceId(1);
  l.setOk();
};
const Fill kLoadedError = [](auto w) {
  auto l = w.initLoaded();
  l.setInterfaceId(2);
  l.setError(textOf("interfaces/adt/transform.js:3:7: SyntaxError: Unexpected token"));
};
const Fill kOutput = [](auto w) {
  auto o = w.initOutcome();
  o.setCallId(7);
  o.setKind(proto::wire::OutcomeKind::OUTPUT);
  o.setData(bytesOf(kHl7));
};
const Fill kQuarantine = [](auto w) {
  auto o = w.initOutcome();
  o.setCallId(8);
  o.setKind(proto::wire::OutcomeKind::QUARANTINE);
  o.setData(bytesOf("TypeError: x is undefined\n    at transform (transform.js:4:10)"));
};
const Fill kTransient = [](auto w) {
  auto o = w.initOutcome();
  o.setCallId(9);
  o.setKind(proto::wire::OutcomeKind::TRANSIENT);
  o.setData(bytesOf("[ductus:transient] the lab API answered 503"));
};
const Fill kDbQuery = [](auto w) {
  auto s = w.initService();
  s.setRequestId(1);
  s.setCallId(7);
  auto d = s.initDbQuery();
  d.setResource(textOf("lab"));
  d.setSql(textOf("select name from patients where mrn = $1"));
  d.setParamsJson(textOf("[\"12345\"]"));
};
const Fill kFetch = [](auto w) {
  auto s = w.initService();
  s.setRequestId(2);
  s.setCallId(7);
  auto f = s.initFetch();
  f.setUrl(textOf("/results"));
  f.setApi(textOf("lab-receiver"));
  f.setInitJson(textOf("{\"method\":\"POST\",\"body\":\"{}\"}"));
};
const Fill kEnv = [](auto w) {
  auto s = w.initService();
  s.setRequestId(3);
  s.setCallId(7);
  s.setEnv(textOf("SITE"));
};
const Fill kSecret = [](auto w) {
  auto s = w.initService();
  s.setRequestId(4);
  s.setCallId(7);
  s.setSecret(textOf("LAB_TOKEN"));
};
const Fill kLog = [](auto w) {
  auto l = w.initLog();
  l.setCallId(7);
  l.setLevel(textOf("warn"));
  l.setText(textOf("patient without MRN"));
};

void write(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::printf("%s/%s: %zu bytes\n", dir.c_str(), name.c_str(), bytes.size());
}

std::string one(const Fill& fill, size_t hint = 64) {
  std::string out;
  append(out, hint, fill);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  write(dir, "ready", one(kReady, 8));
  write(dir, "pong", one(kPong, 8));
  write(dir, "loaded-ok", one(kLoadedOk));
  write(dir, "loaded-error", one(kLoadedError));
  write(dir, "outcome-output", one(kOutput, 32));
  write(dir, "outcome-quarantine", one(kQuarantine));
  write(dir, "outcome-transient", one(kTransient));
  write(dir, "service-db", one(kDbQuery));
  write(dir, "service-fetch", one(kFetch));
  write(dir, "service-env", one(kEnv));
  write(dir, "service-secret", one(kSecret));
  write(dir, "log", one(kLog));

  // A pipelined batch, as one flush of the worker writes it: hints too small
  // for some frames, so those spill and are flattened.
  std::string batch;
  append(batch, 8, kReady);
  append(batch, 4, kOutput);
  append(batch, 64, kDbQuery);
  append(batch, 8, kLog);
  append(batch, 64, kLoadedError);
  append(batch, 8, kPong);
  write(dir, "batch", batch);

  // One message over several segments (a builder with a tiny first segment
  // and fixed growth), as capnp::writeMessage frames it.
  capnp::MallocMessageBuilder multi(2, capnp::AllocationStrategy::FIXED_SIZE);
  kOutput(multi.initRoot<proto::wire::FromWorker>());
  write(dir, "multi-segment", proto::serialize(multi));
  return 0;
}
