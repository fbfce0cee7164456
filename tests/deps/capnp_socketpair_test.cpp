// A Cap'n Proto message crosses a socketpair between two processes, and the
// supervisor-side FrameReader reassembles it from arbitrary chunks and
// refuses a frame over its limit. appendFrame builds frames in place that
// read back the same as ordinarily serialized ones, also when they outgrow
// the space they were given.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "proto/frame.h"
#include "proto/worker.capnp.h"
#include "tests/support/exit_status.h"

namespace ductus::proto {
namespace {

using wire::ToWorker;  // the generated code, as the codec uses it

void fillInvoke(capnp::MessageBuilder& b, uint64_t callId, const std::string& payload) {
  auto inv = b.initRoot<ToWorker>().initInvoke();
  inv.setCallId(callId);
  inv.setFunctionId(7);
  inv.setPayload(kj::arrayPtr(reinterpret_cast<const capnp::byte*>(payload.data()),
                              payload.size()));
  inv.initMeta().setDestination("lab");
}

std::string buildInvoke(uint64_t callId, const std::string& payload) {
  capnp::MallocMessageBuilder b;
  fillInvoke(b, callId, payload);
  return serialize(b);
}

TEST(CapnpSocketpair, MessagesRoundTripBetweenTwoProcesses) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  // A payload with every byte value, like an ISO-8859-1 HL7 message.
  std::string payload;
  for (int i = 0; i < 100000; ++i) payload.push_back(static_cast<char>(i & 0xff));

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(sv[0]);
    for (uint64_t id = 1; id <= 3; ++id) {
      std::string bytes = buildInvoke(id, payload);
      size_t off = 0;
      while (off < bytes.size()) {
        // Small writes so the reader sees split frames.
        ssize_t n = write(sv[1], bytes.data() + off, std::min<size_t>(777, bytes.size() - off));
        if (n <= 0) _exit(1);
        off += n;
      }
    }
    _exit(0);
  }
  close(sv[1]);

  FrameReader reader;
  int got = 0;
  char buf[1000];
  ssize_t n;
  while (got < 3 && (n = read(sv[0], buf, sizeof buf)) > 0) {
    reader.feed(buf, n);
    for (;;) {
      auto f = reader.next();
      ASSERT_TRUE(f.ok()) << f.error().message;
      if (!*f) break;
      auto msg = (*f)->getRoot<ToWorker>();
      ASSERT_TRUE(msg.isInvoke());
      auto inv = msg.getInvoke();
      EXPECT_EQ(inv.getCallId(), static_cast<uint64_t>(++got));
      EXPECT_EQ(inv.getFunctionId(), 7u);
      EXPECT_EQ(std::string(inv.getMeta().getDestination().cStr()), "lab");
      auto p = inv.getPayload();
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(p.begin()), p.size()), payload);
    }
  }
  EXPECT_EQ(got, 3);
  EXPECT_EQ(reader.bufferedBytes(), 0u);
  close(sv[0]);
  int st;
  waitpid(child, &st, 0);
  EXPECT_TRUE(::ductus::test::exitedWith(st, 0));
}

TEST(CapnpSocketpair, AFrameOverTheLimitIsRefusedBeforeItIsBuffered) {
  FrameLimits limits;
  limits.maxMessageBytes = 4096;
  FrameReader reader(limits);
  // A segment table announcing one segment of 1 GiB.
  uint32_t header[2] = {0, (1u << 30) / 8};
  reader.feed(reinterpret_cast<const char*>(header), sizeof header);
  auto f = reader.next();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("over the limit"), std::string::npos) << f.error().message;
}

TEST(CapnpSocketpair, GarbageIsReportedNotCrashed) {
  FrameReader reader;
  // Claims 2^31 segments.
  uint32_t header[2] = {0x7fffffff, 1};
  reader.feed(reinterpret_cast<const char*>(header), sizeof header);
  auto f = reader.next();
  EXPECT_FALSE(f.ok());
}

TEST(CapnpSocketpair, FramesBuiltInPlaceMatchSerializedOnesAndReadInPlace) {
  std::string small = "MSH|^~\\&|A\r", big(100000, 'x');
  std::string queued;
  // Enough room; far too little (spills into more segments); none at all.
  appendFrame(queued, small.size() / 8 + 32, [&](capnp::MessageBuilder& b) { fillInvoke(b, 1, small); });
  appendFrame(queued, 4, [&](capnp::MessageBuilder& b) { fillInvoke(b, 2, big); });
  appendFrame(queued, 0, [&](capnp::MessageBuilder& b) { fillInvoke(b, 3, small); });
  std::string expected = buildInvoke(1, small);
  EXPECT_EQ(queued.substr(0, expected.size()), expected) << "a frame that fits is byte-identical";

  // Read back through space()/commit() in odd-sized pieces.
  FrameReader reader;
  std::vector<std::string> got;
  size_t off = 0;
  while (off < queued.size()) {
    size_t n = std::min<size_t>(777, queued.size() - off);
    auto space = reader.space(n);
    ASSERT_GE(space.size(), n);
    std::memcpy(space.begin(), queued.data() + off, n);
    reader.commit(n);
    off += n;
    for (;;) {
      auto f = reader.next();
      ASSERT_TRUE(f.ok()) << f.error().message;
      if (!*f) break;
      auto inv = (*f)->getRoot<ToWorker>().getInvoke();
      EXPECT_EQ(inv.getCallId(), got.size() + 1);
      EXPECT_EQ(std::string(inv.getMeta().getDestination().cStr()), "lab");
      auto p = inv.getPayload();
      got.emplace_back(reinterpret_cast<const char*>(p.begin()), p.size());
    }
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], small);
  EXPECT_EQ(got[1], big);
  EXPECT_EQ(got[2], small);
  EXPECT_EQ(reader.bufferedBytes(), 0u);
}

}  // namespace
}  // namespace ductus::proto
