// Framing for the worker socket on a libuv stream. Bytes arrive in arbitrary
// chunks; FrameReader collects them into word-aligned storage and yields one
// whole Cap'n Proto message at a time (capnp::expectedSizeInWordsFromPrefix),
// with a hard size limit so an untrusted peer cannot make us allocate freely.
//
// Reading fields of a Frame can still throw kj::Exception on a malformed
// message; callers treat that like a framing error and drop the peer.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace ductus::proto {

struct FrameLimits {
  size_t maxMessageBytes = size_t{80} << 20;  // a 64 MB payload plus envelope
  int nestingLimit = 64;
};

// One received message; owns the words the reader points into.
class Frame {
 public:
  Frame(std::vector<capnp::word> words, const FrameLimits& limits);
  template <typename T>
  typename T::Reader getRoot() {
    return reader_.getRoot<T>();
  }

 private:
  std::vector<capnp::word> words_;
  capnp::FlatArrayMessageReader reader_;
};

class FrameReader {
 public:
  explicit FrameReader(FrameLimits limits = {}) : limits_(limits) {}

  // Appends received bytes.
  void feed(const char* data, size_t len);

  // The next complete message; nullptr when more bytes are needed; an Error
  // when the peer announced a frame over the limit (drop the connection).
  Result<std::unique_ptr<Frame>> next();

  size_t bufferedBytes() const { return len_ - start_; }

 private:
  FrameLimits limits_;
  std::vector<capnp::word> buf_;
  size_t len_ = 0;    // bytes used in buf_
  size_t start_ = 0;  // bytes of buf_ already handed out as frames
};

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
