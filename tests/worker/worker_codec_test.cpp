// The worker protocol's codec (proto/worker_codec.h), which both sides of a
// worker socket use: every message comes back as it was sent, through the
// supervisor's FrameReader; and what a hostile worker can send instead (a
// truncated frame, garbage) decodes to an Error, never an exception or a
// crash.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <variant>

#include "proto/frame.h"
#include "proto/worker_codec.h"

namespace ductus::proto {
namespace {

using namespace std::string_literals;

// Feeds encoded bytes to a FrameReader and decodes its one frame; the
// decoded views stay valid while this lives.
class OneFrame {
 public:
  explicit OneFrame(const std::string& bytes) { reader_.feed(bytes.data(), bytes.size()); }
  template <typename Decode>
  auto decode(Decode&& d) -> decltype(d(std::declval<Frame&>())) {
    auto f = reader_.next();
    if (!f) return f.error();
    if (!*f) return Error{"no whole frame"};
    return d(**f);
  }
  Result<WorkerCommand> command() { return decode([](Frame& f) { return decodeCommand(f); }); }
  Result<WorkerEvent> event() { return decode([](Frame& f) { return decodeEvent(f); }); }

 private:
  FrameReader reader_;
};

TEST(WorkerCodec, ALoadComesBackWhole) {
  Load l;
  l.interfaceId = 7;
  l.name = "adt";
  l.entry = "interfaces/adt/transform.js";
  l.modules = {{"interfaces/adt/transform.js", "export function transform(m) { return m; }"},
               {"lib/util.js", std::string(100000, 'x')}};
  l.functions = {{"transform", "hl7v2", "json", "lab", "iso-8859-1", 3},
                 {"respond", "http", "http", "", "auto", 4}};
  l.timeout = std::chrono::milliseconds(1234);
  std::string bytes;
  encode(bytes, l);
  OneFrame f(bytes);
  auto m = f.command();
  ASSERT_TRUE(m.ok()) << m.error().message;
  auto* got = std::get_if<Load>(&*m);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->interfaceId, 7u);
  EXPECT_EQ(got->name, "adt");
  EXPECT_EQ(got->entry, l.entry);
  EXPECT_EQ(got->modules, l.modules);
  ASSERT_EQ(got->functions.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(got->functions[k].functionId, l.functions[k].functionId);
    EXPECT_EQ(got->functions[k].exportName, l.functions[k].exportName);
    EXPECT_EQ(got->functions[k].inputFormat, l.functions[k].inputFormat);
    EXPECT_EQ(got->functions[k].outputFormat, l.functions[k].outputFormat);
    EXPECT_EQ(got->functions[k].destination, l.functions[k].destination);
    EXPECT_EQ(got->functions[k].charset, l.functions[k].charset);
  }
  EXPECT_EQ(got->timeout, std::chrono::milliseconds(1234));
}

// One made without a timeout (the in-process benchmark's) gets the
// default, not 0 ms, which would stop every call at once.
TEST(WorkerCodec, ALoadWithoutATimeoutHasTheDefaultOne) {
  std::string bytes;
  encode(bytes, Load{});
  OneFrame f(bytes);
  auto m = f.command();
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(std::get<Load>(*m).timeout, std::chrono::milliseconds(5000));
}

TEST(WorkerCodec, EveryOtherCommandComesBackAsSent) {
  // Binary payload bytes, NUL and CR included, come back byte for byte.
  const std::string payload = "MSH|^~\\&|\r\0\xff\x01 PID|1"s;
  std::string bytes;
  encode(bytes, Invoke{42, 9, payload, CallMeta{1001, 1700000000123, "lab", 77}});
  encode(bytes, ServiceReply{5, true, "{\"rows\":[]}"});
  encode(bytes, ServiceReply{6, false, "[ductus:transient] database down"});
  encode(bytes, RunTests{8, 2});
  encode(bytes, Ping{99});
  encode(bytes, WorkerCommand(Shutdown{}));

  FrameReader reader;
  reader.feed(bytes.data(), bytes.size());
  auto next = [&]() -> Result<WorkerCommand> {
    auto f = reader.next();
    if (!f) return f.error();
    if (!*f) return Error{"no whole frame"};
    return decodeCommand(**f);
  };
  {
    auto m = next();
    ASSERT_TRUE(m.ok()) << m.error().message;
    auto& i = std::get<Invoke>(*m);
    EXPECT_EQ(i.callId, 42u);
    EXPECT_EQ(i.functionId, 9u);
    EXPECT_EQ(i.payload, payload);
    EXPECT_EQ(i.meta.messageId, 1001);
    EXPECT_EQ(i.meta.receivedAtMs, 1700000000123);
    EXPECT_EQ(i.meta.destination, "lab");
    EXPECT_EQ(i.meta.originId, 77);
  }
  {
    auto m = next();
    ASSERT_TRUE(m.ok());
    auto& r = std::get<ServiceReply>(*m);
    EXPECT_EQ(r.requestId, 5u);
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.text, "{\"rows\":[]}");
  }
  {
    auto m = next();
    ASSERT_TRUE(m.ok());
    auto& r = std::get<ServiceReply>(*m);
    EXPECT_EQ(r.requestId, 6u);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.text, "[ductus:transient] database down");
  }
  {
    auto m = next();
    ASSERT_TRUE(m.ok());
    auto& t = std::get<RunTests>(*m);
    EXPECT_EQ(t.callId, 8u);
    EXPECT_EQ(t.interfaceId, 2u);
  }
  {
    auto m = next();
    ASSERT_TRUE(m.ok());
    EXPECT_EQ(std::get<Ping>(*m).value, 99u);
  }
  {
    auto m = next();
    ASSERT_TRUE(m.ok());
    EXPECT_TRUE(std::holds_alternative<Shutdown>(*m));
  }
  EXPECT_EQ(reader.bufferedBytes(), 0u);
}

TEST(WorkerCodec, EveryEventComesBackAsSent) {
  const std::string output = "MSH|^~\\&|\rOBX|1\0\xfe"s;
  std::string bytes;
  encode(bytes, Ready{});
  encode(bytes, Loaded{3, std::nullopt});
  encode(bytes, Loaded{4, "interfaces/x/transform.js:3:7: SyntaxError: nope"});
  encode(bytes, Outcome{11, OutcomeKind::Quarantine, "bad PID\n  at transform.js:2"});
  encodeOutput(bytes, 12, output.size(),
               [&](char* to) { std::memcpy(to, output.data(), output.size()); });
  encode(bytes, ServiceRequest{20, 11, DbQuery{"pg", "select $1", "[1]"}, 4500});
  encode(bytes, ServiceRequest{21, 11, DbExecute{"pg", "delete from t", "[]"}, 0});
  encode(bytes, ServiceRequest{22, 12, Fetch{"/v1/x", "lab", "{\"method\":\"GET\"}"}, 10});
  encode(bytes, ServiceRequest{23, 0, Env{"DUCTUS_PUBLIC_SITE"}, 0});
  encode(bytes, ServiceRequest{24, 0, Secret{"token"}, 0});
  encode(bytes, Log{11, "warn", "careful"});
  encode(bytes, WorkerEvent(Pong{99}));

  FrameReader reader;
  reader.feed(bytes.data(), bytes.size());
  auto next = [&]() -> Result<WorkerEvent> {
    auto f = reader.next();
    if (!f) return f.error();
    if (!*f) return Error{"no whole frame"};
    return decodeEvent(**f);
  };
  auto m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(std::holds_alternative<Ready>(*m));
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Loaded>(*m).interfaceId, 3u);
  EXPECT_FALSE(std::get<Loaded>(*m).error.has_value());
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Loaded>(*m).interfaceId, 4u);
  EXPECT_EQ(std::get<Loaded>(*m).error, "interfaces/x/transform.js:3:7: SyntaxError: nope");
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Outcome>(*m).callId, 11u);
  EXPECT_EQ(std::get<Outcome>(*m).kind, OutcomeKind::Quarantine);
  EXPECT_EQ(std::get<Outcome>(*m).data, "bad PID\n  at transform.js:2");
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Outcome>(*m).callId, 12u);
  EXPECT_EQ(std::get<Outcome>(*m).kind, OutcomeKind::Output);
  EXPECT_EQ(std::get<Outcome>(*m).data, output);

  m = next();
  ASSERT_TRUE(m.ok());
  {
    auto& s = std::get<ServiceRequest>(*m);
    EXPECT_EQ(s.requestId, 20u);
    EXPECT_EQ(s.callId, 11u);
    EXPECT_EQ(s.timeLeftMs, 4500u);
    auto& q = std::get<DbQuery>(s.what);
    EXPECT_EQ(q.resource, "pg");
    EXPECT_EQ(q.sql, "select $1");
    EXPECT_EQ(q.paramsJson, "[1]");
  }
  m = next();
  ASSERT_TRUE(m.ok());
  {
    auto& s = std::get<ServiceRequest>(*m);
    EXPECT_EQ(s.requestId, 21u);
    auto& e = std::get<DbExecute>(s.what);
    EXPECT_EQ(e.resource, "pg");
    EXPECT_EQ(e.sql, "delete from t");
    EXPECT_EQ(e.paramsJson, "[]");
  }
  m = next();
  ASSERT_TRUE(m.ok());
  {
    auto& s = std::get<ServiceRequest>(*m);
    EXPECT_EQ(s.timeLeftMs, 10u);
    auto& f = std::get<Fetch>(s.what);
    EXPECT_EQ(f.url, "/v1/x");
    EXPECT_EQ(f.api, "lab");
    EXPECT_EQ(f.initJson, "{\"method\":\"GET\"}");
  }
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Env>(std::get<ServiceRequest>(*m).what).name, "DUCTUS_PUBLIC_SITE");
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Secret>(std::get<ServiceRequest>(*m).what).name, "token");
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Log>(*m).callId, 11u);
  EXPECT_EQ(std::get<Log>(*m).level, "warn");
  EXPECT_EQ(std::get<Log>(*m).text, "careful");
  m = next();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::get<Pong>(*m).value, 99u);
  EXPECT_EQ(reader.bufferedBytes(), 0u);
}

// A kind this build does not know comes through as its number: the pool
// quarantines the call (the worker is not ours to trust), it does not guess.
TEST(WorkerCodec, AnOutcomeOfAnUnknownKindKeepsItsNumber) {
  std::string bytes;
  encode(bytes, Outcome{1, static_cast<OutcomeKind>(40), "?"});
  OneFrame f(bytes);
  auto m = f.event();
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(static_cast<int>(std::get<Outcome>(*m).kind), 40);
}

// The segment table says the frame is shorter than what its pointers
// reach: a frame cut short by a worker that lies about its size.
TEST(WorkerCodec, ATruncatedFrameIsAnInvalidErrorNotAnException) {
  std::string bytes;
  encode(bytes, Invoke{42, 9, std::string(4000, 'p'), CallMeta{1, 2, "lab", 0}});
  ASSERT_GT(bytes.size(), 64u);
  uint32_t table[2];
  std::memcpy(table, bytes.data(), sizeof table);
  ASSERT_EQ(table[0], 0u);  // one segment
  table[1] = 4;              // of four words, where the payload needs hundreds
  std::string cut(bytes.data(), 8);
  std::memcpy(cut.data(), table, sizeof table);
  cut.append(bytes.data() + 8, 4 * 8);
  for (bool asEvent : {false, true}) {
    OneFrame f(cut);
    Error e = asEvent ? f.event().error() : f.command().error();
    EXPECT_EQ(e.kind, ErrorKind::Invalid) << e.message;
    EXPECT_NE(e.message.find("malformed frame"), std::string::npos) << e.message;
  }
}

// Random words behind a well-formed segment table: each decodes to a
// message or to an Invalid error, and nothing throws or crashes (the
// sanitizer build checks the reads).
TEST(WorkerCodec, GarbageFramesDecodeToErrorsNotCrashes) {
  std::mt19937_64 rng(29);
  int errors = 0;
  for (int i = 0; i < 2000; ++i) {
    uint32_t words = 1 + static_cast<uint32_t>(rng() % 16);
    uint32_t table[2] = {0, words};
    std::string frame(reinterpret_cast<const char*>(table), sizeof table);
    for (uint32_t w = 0; w < words; ++w) {
      uint64_t v = rng();
      // Often a struct pointer at the root with small offsets, so the
      // decoder gets past the root and into the unions and lists.
      if (w == 0 && rng() % 2) v = (v & 0xffff'0000'0000'0000ull) | (uint64_t{1} << 32) | ((rng() % 4) << 2);
      frame.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    OneFrame a(frame), b(frame);
    auto e = a.event();
    auto c = b.command();
    if (!e) {
      EXPECT_EQ(e.error().kind, ErrorKind::Invalid) << e.error().message;
      ++errors;
    }
    if (!c) {
      EXPECT_EQ(c.error().kind, ErrorKind::Invalid) << c.error().message;
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace ductus::proto
