// MLLP (HL7's Minimal Lower Layer Protocol) framing: every message on the
// wire is <VT> message <FS><CR>. The listener, the sender, the file
// splitter (files often keep the framing of the stream they were cut from)
// and the message reader all need these bytes; they are spelled here only.
#pragma once

#include <string>
#include <string_view>

namespace ductus::hl7::mllp {

inline constexpr char kStartBlock = 0x0b;      // <VT>
inline constexpr char kEndBlock = 0x1c;        // <FS>
inline constexpr char kCarriageReturn = 0x0d;  // <CR>, right after <FS>

// The message as it goes on the wire.
inline std::string frame(std::string_view message) {
  std::string out;
  out.reserve(message.size() + 3);
  out += kStartBlock;
  out += message;
  out += kEndBlock;
  out += kCarriageReturn;
  return out;
}

}  // namespace ductus::hl7::mllp
