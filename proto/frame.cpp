#include "proto/frame.h"

#include <bit>
#include <cstdint>
#include <cstring>

#include <kj/vector.h>

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

Frame::Frame(kj::ArrayPtr<const capnp::word> words, const FrameLimits& limits)
    : reader_(words, readerOptions(limits)) {}

kj::ArrayPtr<char> FrameReader::space(size_t atLeast) {
  current_.reset();
  // Consumed frames leave a gap at the front; close it only when it is at
  // least half the bytes held, so a read holding many frames is not moved
  // once per frame.
  if (start_ > 0 && (start_ >= len_ - start_ || len_ == start_)) {
    std::memmove(buf_.data(), reinterpret_cast<char*>(buf_.data()) + start_, len_ - start_);
    len_ -= start_;
    start_ = 0;
  }
  size_t needWords = (len_ + atLeast + sizeof(capnp::word) - 1) / sizeof(capnp::word);
  if (buf_.size() < needWords) buf_.resize(std::max(needWords, buf_.size() * 2));
  char* base = reinterpret_cast<char*>(buf_.data());
  return kj::arrayPtr(base + len_, buf_.size() * sizeof(capnp::word) - len_);
}

void FrameReader::feed(const char* data, size_t len) {
  std::memcpy(space(len).begin(), data, len);
  commit(len);
}

Result<Frame*> FrameReader::next() {
  constexpr size_t W = sizeof(capnp::word);
  current_.reset();
  // start_ is a whole number of words: frames are.
  static_assert(sizeof(capnp::word) == sizeof(uint64_t) &&
                alignof(capnp::word) <= alignof(uint64_t));
  const capnp::word* begin = reinterpret_cast<const capnp::word*>(buf_.data()) + start_ / W;
  size_t haveWords = (len_ - start_) / W;
  if (haveWords == 0) return nullptr;
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
  if (expected > haveWords) return nullptr;
  start_ += expected * W;
  // The frame's words stay where they are until space() moves them, which
  // resets current_ first.
  if (start_ == len_) start_ = len_ = 0;
  try {
    current_.emplace(kj::arrayPtr(begin, expected), limits_);
  } catch (const kj::Exception& e) {
    return Error{std::string("malformed frame: ") + e.getDescription().cStr()};
  }
  return &*current_;
}

namespace {

// A builder whose first segment is a zeroed stretch of the output string.
// (MallocMessageBuilder takes a first segment too, but zeroes it again when
// destroyed: the frame would be wiped before it is written.) What the
// message needs beyond that comes from the heap, zeroed as capnp requires.
class InPlaceBuilder : public capnp::MessageBuilder {
 public:
  explicit InPlaceBuilder(kj::ArrayPtr<capnp::word> first) : first_(first) {}
  kj::ArrayPtr<capnp::word> allocateSegment(uint minimumSize) override {
    if (!gaveFirst_ && minimumSize <= first_.size()) {
      gaveFirst_ = true;
      return first_;
    }
    gaveFirst_ = true;
    auto seg = kj::heapArray<capnp::word>(std::max<size_t>(minimumSize, first_.size()));
    std::memset(seg.begin(), 0, seg.size() * sizeof(capnp::word));
    more_.add(kj::mv(seg));
    return more_.back();
  }
  const capnp::word* first() const { return first_.begin(); }

 private:
  kj::ArrayPtr<capnp::word> first_;
  bool gaveFirst_ = false;
  kj::Vector<kj::Array<capnp::word>> more_;
};

}  // namespace

void appendFrame(std::string& out, size_t hintWords,
                 kj::FunctionParam<void(capnp::MessageBuilder&)> fill) {
  static_assert(std::endian::native == std::endian::little,
                "the segment table is written as the host's integers");
  const size_t at = out.size();
  const size_t words = std::max<size_t>(hintWords, 8);
  // The segment must be word-aligned: the string's heap buffer is (malloc
  // aligns to 16) and every frame before this one is whole words long.
  if (out.capacity() < 256) out.reserve(4096);
  out.resize(at + (1 + words) * sizeof(capnp::word));  // zero-filled, as capnp requires
  if (reinterpret_cast<uintptr_t>(out.data() + at) % alignof(capnp::word) != 0) {
    out.resize(at);  // not expected with glibc; stay correct anyway
    capnp::MallocMessageBuilder b(words);
    fill(b);
    AppendTo w(out);
    capnp::writeMessage(w, b);
    return;
  }
  auto* first = reinterpret_cast<capnp::word*>(out.data() + at + sizeof(capnp::word));
  InPlaceBuilder b(kj::arrayPtr(first, words));
  fill(b);
  auto segments = b.getSegmentsForOutput();
  if (segments.size() == 1 && segments[0].begin() == b.first()) {
    // The segment table of a one-segment message: (count - 1), then its size.
    uint32_t table[2] = {0, static_cast<uint32_t>(segments[0].size())};
    std::memcpy(out.data() + at, table, sizeof table);
    out.resize(at + (1 + segments[0].size()) * sizeof(capnp::word));
    return;
  }
  // It spilled past the hint: flatten it first (its first segment lives in
  // the very bytes it would be written over), then append.
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(b);
  out.resize(at);
  auto bytes = flat.asBytes();
  out.append(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

std::string serialize(capnp::MessageBuilder& builder) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

}  // namespace ductus::proto
