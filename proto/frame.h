// Framing for the worker socket on a libuv stream. Bytes arrive in arbitrary
// chunks; FrameReader collects them into word-aligned storage and yields one
// whole Cap'n Proto message at a time (capnp::expectedSizeInWordsFromPrefix),
// with a hard size limit so an untrusted peer cannot make us allocate freely.
// Every call's payload crosses this twice, so neither side copies a frame
// more than it must: received frames are parsed where they were read, and
// outgoing ones are built where they will be written from.
//
// Reading fields of a Frame can still throw kj::Exception on a malformed
// message: only the codec (proto/worker_codec.h) reads them, and it turns
// that into an Error, on which the caller drops the peer.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/function.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace ductus::proto {

// The most either side of a worker socket reads at once: a pipelined
// batch of ~90 calls of a 3 KB message.
inline constexpr size_t kReadBytes = 256 * 1024;

struct FrameLimits {
  size_t maxMessageBytes = size_t{80} << 20;  // a 64 MB payload plus envelope
  int nestingLimit = 64;
};

// One received message, read in place from the FrameReader's buffer: valid
// until the reader is next fed or asked for the next frame.
class Frame {
 public:
  Frame(kj::ArrayPtr<const capnp::word> words, const FrameLimits& limits);
  template <typename T>
  typename T::Reader getRoot() {
    return reader_.getRoot<T>();
  }

 private:
  capnp::FlatArrayMessageReader reader_;
};

// Collects a byte stream into word-aligned storage and cuts it into frames.
// A reader reads straight into it (space(), then commit()), so a frame's
// bytes are copied once, by the kernel, and parsed where they lie.
class FrameReader {
 public:
  explicit FrameReader(FrameLimits limits = {}) : limits_(limits) {}

  // Room for at least `atLeast` more bytes at the end of what is held; fill
  // some of it, then commit() how much. Invalidates the current frame.
  kj::ArrayPtr<char> space(size_t atLeast);
  void commit(size_t n) { len_ += n; }

  // Appends received bytes (space() + copy + commit()).
  void feed(const char* data, size_t len);

  // The next complete message, valid until the next call to next(), space()
  // or feed(); nullptr when more bytes are needed; an Error when the peer
  // announced a frame over the limit or sent garbage (drop the connection).
  Result<Frame*> next();

  size_t bufferedBytes() const { return len_ - start_; }

 private:
  FrameLimits limits_;
  // Words as plain integers: a vector's resize() needs copyable words, and
  // Cap'n Proto 0.9 (Debian 12) makes capnp::word copyable under GCC but
  // not under clang (capnp/common.h), which builds the Debug flavour.
  std::vector<uint64_t> buf_;
  size_t len_ = 0;    // bytes used in buf_
  size_t start_ = 0;  // bytes of buf_ already handed out as frames
  std::optional<Frame> current_;
};

// Builds a message straight into `out` behind what is already queued there:
// the segment table, then the first segment, so the frame is neither built
// elsewhere nor copied. `fill` gets the message's builder; `hintWords`
// should cover the whole message (payloads included), or the builder spills
// into a second segment and the message is serialized the ordinary way.
void appendFrame(std::string& out, size_t hintWords,
                 kj::FunctionParam<void(capnp::MessageBuilder&)> fill);

// A kj::OutputStream appending to a std::string, so a message is serialized
// straight behind what is already queued for writing (no flat copy first).
class AppendTo : public kj::OutputStream {
 public:
  explicit AppendTo(std::string& s) : s_(s) {}
  using kj::OutputStream::write;
  void write(const void* buffer, size_t size) override {
    s_.append(static_cast<const char*>(buffer), size);
  }

 private:
  std::string& s_;
};

// Serializes a built message into one contiguous byte string for a write.
std::string serialize(capnp::MessageBuilder& builder);

}  // namespace ductus::proto
