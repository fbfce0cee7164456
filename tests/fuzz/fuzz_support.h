// What the fuzz targets share: a check that aborts with a message (libFuzzer
// saves the input as a crash), a deterministic generator seeded from the
// input (chunk sizes, split points: the same input always runs the same way,
// so every crash replays), and quiet logs (the code under test logs every
// refusal; at thousands of inputs a second that is all the fuzzer would do).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"

namespace ductus::fuzz {

// Prints what was expected and aborts; libFuzzer writes the input as a
// crash file (SIGABRT is a "deadly signal" to it).
[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "\n==== FUZZ CHECK FAILED at %s:%d\n%s\n", file, line, what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, what)                                                \
  do {                                                                        \
    if (!(cond)) ::ductus::fuzz::fail(__FILE__, __LINE__, std::string(#cond) + ": " + (what)); \
  } while (0)

// Bytes shown with escapes, for check messages.
inline std::string show(std::string_view s, size_t max = 400) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

// splitmix64, seeded with FNV-1a of the input.
class Rng {
 public:
  explicit Rng(std::string_view input) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : input) h = (h ^ c) * 1099511628211ull;
    state_ = h;
  }
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); 0 when n is 0.
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }

 private:
  uint64_t state_;
};

// Cuts `input` into at most maxPieces pieces at points drawn from rng:
// sometimes whole, sometimes a few random cuts, sometimes many small
// pieces at the front (where headers and frame starts are).
inline std::vector<std::string_view> split(std::string_view input, Rng& rng, size_t maxPieces) {
  std::vector<std::string_view> out;
  size_t mode = rng.below(4);
  if (mode == 0 || input.size() < 2 || maxPieces < 2) {
    out.push_back(input);
    return out;
  }
  size_t pieces = 2 + rng.below(maxPieces - 1);
  size_t at = 0;
  while (at < input.size() && out.size() + 1 < pieces) {
    size_t left = input.size() - at;
    size_t n = mode == 1 ? 1 + rng.below(std::min<size_t>(left, 16))
                         : 1 + rng.below(left);
    out.push_back(input.substr(at, n));
    at += n;
  }
  if (at < input.size()) out.push_back(input.substr(at));
  return out;
}

// Turns the code under test's logging off, once per process.
inline void quietLogs() { spdlog::set_level(spdlog::level::off); }

}  // namespace ductus::fuzz
