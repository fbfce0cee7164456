// MLLP (HL7's Minimal Lower Layer Protocol) framing: every message on the
// wire is <VT> message <FS><CR>. The listener, the sender, the file
// splitter (files often keep the framing of the stream they were cut from)
// and the message reader all need these bytes; they are spelled here only.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

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

// Why `message` can't be taken or framed as one HL7 message: it holds a
// framing byte (<VT> or <FS>), and framed as it is, the receiver's framer
// would end the frame there and read what follows as a second message that
// was never stored, transformed, filtered, deduplicated or ordered. `what`
// names it in the reason ("message", "output"). Every door checks with this
// one function: the MLLP listener (AR), the HTTP queue source (400), the
// file source (the record quarantined at intake), the API's edit (400) and
// the MLLP sender (the delivery quarantined), so no transform can smuggle
// one out either.
inline Status refuseFramingBytes(std::string_view message, std::string_view what = "message") {
  size_t at = message.find_first_of(std::string_view("\x0b\x1c", 2));
  if (at == std::string_view::npos) return {};
  const char* name = message[at] == kStartBlock ? "0x0B, start block" : "0x1C, end block";
  return Error{std::string(what) + " contains MLLP framing bytes (" + name + " at byte " +
               std::to_string(at) + "): framing bytes are never part of an HL7 message"};
}

}  // namespace ductus::hl7::mllp
