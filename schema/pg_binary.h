// Binary-format parameters for libpq (PostgreSQL's "send" wire formats) and
// the decoding of bytea's text output. Payloads travel as binary bytea (no
// hex doubling of a 64 MB message), and batches as binary arrays whose
// element order the server keeps, so unnest(...) WITH ORDINALITY sees the
// caller's order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ductus::store::pgbinary {

// Element type OIDs from pg_type.
constexpr uint32_t kBool = 16, kBytea = 17, kInt8 = 20, kInt2 = 21, kInt4 = 23, kText = 25;

std::string int8(int64_t v);
std::string int4(int32_t v);
std::string boolean(bool v);

// One-dimensional arrays; a nullopt element is SQL NULL.
std::string int8Array(const std::vector<int64_t>& v);
std::string int4Array(const std::vector<int32_t>& v);
std::string int2Array(const std::vector<int16_t>& v);
std::string boolArray(const std::vector<bool>& v);
// Bytea and text arrays share the layout: length-prefixed bytes.
std::string bytesArray(uint32_t elementOid, const std::vector<std::optional<std::string>>& v);
std::string bytesArray(uint32_t elementOid, const std::vector<std::string>& v);

// An integer column in binary result format (int2, int4 or int8: network
// byte order, sized by its type).
Result<int64_t> readInteger(std::string_view bytes);

// bytea in text output ("\x4142...") back to bytes.
Result<std::string> decodeByteaText(std::string_view text);

}  // namespace ductus::store::pgbinary
