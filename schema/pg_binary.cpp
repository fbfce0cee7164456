#include "schema/pg_binary.h"

#include <arpa/inet.h>

#include <cstring>

#include "common/hex.h"

namespace ductus::store::pgbinary {
namespace {

void put32(std::string& out, uint32_t v) {
  uint32_t be = htonl(v);
  out.append(reinterpret_cast<const char*>(&be), 4);
}

void put64(std::string& out, uint64_t v) {
  put32(out, static_cast<uint32_t>(v >> 32));
  put32(out, static_cast<uint32_t>(v & 0xffffffffu));
}

// Array header: ndim 1, has-nulls flag, element type, then the one dimension.
std::string header(uint32_t oid, size_t n, bool hasNulls) {
  std::string out;
  put32(out, 1);
  put32(out, hasNulls ? 1 : 0);
  put32(out, oid);
  put32(out, static_cast<uint32_t>(n));
  put32(out, 1);  // lower bound
  return out;
}

}  // namespace

std::string int8(int64_t v) {
  std::string out;
  put64(out, static_cast<uint64_t>(v));
  return out;
}

std::string int4(int32_t v) {
  std::string out;
  put32(out, static_cast<uint32_t>(v));
  return out;
}

std::string boolean(bool v) { return std::string(1, v ? '\1' : '\0'); }

std::string int8Array(const std::vector<int64_t>& v) {
  std::string out = header(kInt8, v.size(), false);
  out.reserve(out.size() + v.size() * 12);
  for (int64_t x : v) {
    put32(out, 8);
    put64(out, static_cast<uint64_t>(x));
  }
  return out;
}

std::string int4Array(const std::vector<int32_t>& v) {
  std::string out = header(kInt4, v.size(), false);
  for (int32_t x : v) {
    put32(out, 4);
    put32(out, static_cast<uint32_t>(x));
  }
  return out;
}

std::string int2Array(const std::vector<int16_t>& v) {
  std::string out = header(kInt2, v.size(), false);
  for (int16_t x : v) {
    put32(out, 2);
    uint16_t be = htons(static_cast<uint16_t>(x));
    out.append(reinterpret_cast<const char*>(&be), 2);
  }
  return out;
}

std::string boolArray(const std::vector<bool>& v) {
  std::string out = header(kBool, v.size(), false);
  for (bool x : v) {
    put32(out, 1);
    out.push_back(x ? '\1' : '\0');
  }
  return out;
}

std::string bytesArray(uint32_t elementOid, const std::vector<std::optional<std::string>>& v) {
  bool hasNulls = false;
  size_t total = 0;
  for (auto& x : v) {
    hasNulls |= !x.has_value();
    total += 4 + (x ? x->size() : 0);
  }
  std::string out = header(elementOid, v.size(), hasNulls);
  out.reserve(out.size() + total);
  for (auto& x : v) {
    if (!x) {
      put32(out, 0xffffffffu);  // -1: NULL
      continue;
    }
    put32(out, static_cast<uint32_t>(x->size()));
    out.append(*x);
  }
  return out;
}

std::string bytesArray(uint32_t elementOid, const std::vector<std::string>& v) {
  size_t total = 0;
  for (auto& x : v) total += 4 + x.size();
  std::string out = header(elementOid, v.size(), false);
  out.reserve(out.size() + total);
  for (auto& x : v) {
    put32(out, static_cast<uint32_t>(x.size()));
    out.append(x);
  }
  return out;
}

Result<int64_t> readInteger(std::string_view bytes) {
  uint64_t v = 0;
  for (unsigned char c : bytes) v = (v << 8) | c;
  switch (bytes.size()) {
    case 2: return static_cast<int64_t>(static_cast<int16_t>(v));
    case 4: return static_cast<int64_t>(static_cast<int32_t>(v));
    case 8: return static_cast<int64_t>(v);
    default:
      return Error{"an integer in binary format is 2, 4 or 8 bytes, not " +
                   std::to_string(bytes.size())};
  }
}

Result<std::string> decodeByteaText(std::string_view text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0)
    return Error{"bytea value is not in hex output format (bytea_output must be 'hex')"};
  std::string out;
  out.resize((text.size() - 2) / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = hexValue(text[2 + 2 * i]), lo = hexValue(text[3 + 2 * i]);
    if (hi < 0 || lo < 0) return Error{"bytea value has a character that is not hex"};
    out[i] = static_cast<char>((hi << 4) | lo);
  }
  return out;
}

}  // namespace ductus::store::pgbinary
