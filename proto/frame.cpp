#include "proto/frame.h"

#include <cstring>

namespace ductus::proto {
namespace {

capnp::ReaderOptions readerOptions(const FrameLimits& limits) {
  capnp::ReaderOptions o;
  // The traversal limit bounds how much a message may make us read in total,
  // including amplification via shared pointers; twice its size is generous.
  o.traversalLimitInWords = 2 * (limits.maxMessageBytes / sizeof(capnp::word));
  o.nestingLimit = limits.nestingLimit;
  return o;
}

}  // namespace

Frame::Frame(std::vector<capnp::word> words, const FrameLimits& limits)
    : words_(std::move(words)),
      reader_(kj::arrayPtr(words_.data(), words_.size()), readerOptions(limits)) {}

void FrameReader::feed(const char* data, size_t len) {
  // Consumed frames leave a gap at the front; close it only when it is at
  // least half the bytes held, so a read holding many frames is not moved
  // once per frame.
  if (start_ > 0 && (start_ >= len_ - start_ || len_ == start_)) {
    std::memmove(buf_.data(), reinterpret_cast<char*>(buf_.data()) + start_, len_ - start_);
    len_ -= start_;
    start_ = 0;
  }
  size_t needWords = (len_ + len + sizeof(capnp::word) - 1) / sizeof(capnp::word);
  if (buf_.size() < needWords) buf_.resize(std::max(needWords, buf_.size() * 2));
  std::memcpy(reinterpret_cast<char*>(buf_.data()) + len_, data, len);
  len_ += len;
}

Result<std::unique_ptr<Frame>> FrameReader::next() {
  constexpr size_t W = sizeof(capnp::word);
  // start_ is a whole number of words: frames are.
  const capnp::word* begin = buf_.data() + start_ / W;
  size_t haveWords = (len_ - start_) / W;
  if (haveWords == 0) return std::unique_ptr<Frame>{};
  size_t expected;
  try {
    expected = capnp::expectedSizeInWordsFromPrefix(kj::arrayPtr(begin, haveWords));
  } catch (const kj::Exception& e) {
    return Error{std::string("malformed frame: ") + e.getDescription().cStr()};
  }
  if (expected * W > limits_.maxMessageBytes) {
    return Error{"frame of " + std::to_string(expected * W) + " bytes is over the limit of " +
                 std::to_string(limits_.maxMessageBytes)};
  }
  if (expected > haveWords) return std::unique_ptr<Frame>{};

  std::vector<capnp::word> words(begin, begin + expected);
  start_ += expected * W;
  if (start_ == len_) start_ = len_ = 0;
  try {
    return std::make_unique<Frame>(std::move(words), limits_);
  } catch (const kj::Exception& e) {
    return Error{std::string("malformed frame: ") + e.getDescription().cStr()};
  }
}

std::string serialize(capnp::MessageBuilder& builder) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

}  // namespace ductus::proto
