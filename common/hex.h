// A hexadecimal digit's value, for the decoders that read hex from outside
// (bytea's text form, HL7's \X..\ escapes).
#pragma once

namespace ductus {

// 0-15, or -1 for anything that is not a hex digit.
constexpr int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace ductus
