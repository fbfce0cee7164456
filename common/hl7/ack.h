// Building the ACK for a received message:
//
//   MSH|^~\&|<MSH-5>|<MSH-6>|<MSH-3>|<MSH-4>|<now>||ACK^<MSH-9.2>^ACK|<new id>|<MSH-11 or P>|<MSH-12>
//   MSA|AA|<MSH-10>|<text>
//
// in the sender's own delimiters (MSH-1/MSH-2 copied verbatim), with the
// sending and receiving application/facility swapped, segments ending in \r.
// MSH-3..6 and MSH-10 are copied as raw bytes, so whatever encoding they came
// in goes back unchanged. MSH-11 (processing id) is echoed because receivers
// in test ("T") setups check it; "P" when the message had none.
//
// Enhanced acknowledgment mode: when the message fills MSH-15 (accept
// acknowledgment type), the answer is an accept ACK: CA/CE/CR instead of
// AA/AE/AR, since what intake confirms is that it has stored (committed) the
// message. The NE/ER/SU conditions are not honoured: an MLLP sender waits for
// one answer per message, so one is always sent.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "common/hl7/message.h"

namespace ductus::hl7 {

enum class AckCode {
  Accept,  // AA / CA: stored
  Error,   // AE / CE: storing failed; the sender should retry
  Reject,  // AR / CR: the message can't be taken (no MSH, too large)
};

// "AA", "AE", "AR", or "CA", "CE", "CR" in enhanced mode.
std::string_view ackCodeText(AckCode code, bool enhanced);

// Whether the message asks for enhanced mode (MSH-15 not empty).
bool wantsEnhancedAck(const MessageView& msg);

struct AckOptions {
  std::string controlId;  // the ACK's own MSH-10; newControlId() if empty
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
};

// The ACK for `msg`; `text` goes into MSA-3, escaped for the sender's
// delimiters.
std::string buildAck(const MessageView& msg, AckCode code, std::string_view text,
                     const AckOptions& opt = {});

// The answer to bytes with no readable MSH: standard delimiters, empty
// applications, MSA-2 `controlId` (escaped; empty: nothing to echo).
std::string buildAckWithoutMessage(AckCode code, std::string_view text,
                                   const AckOptions& opt = {}, std::string_view controlId = {});

// The answer to any bytes, however much of their MSH can be read:
// buildAck() when MessageView::parse() reads it; else, when MSH-1 is still a
// usable field separator (not a letter, digit, terminator, NUL or framing
// byte) and only MSH-2 is not, buildAckWithoutMessage() echoing the MSH-10
// read field by field, so the sender can match the AR to its message; else
// one with an empty MSA-2.
std::string buildAckFor(std::string_view bytes, AckCode code, std::string_view text,
                        const AckOptions& opt = {});

// A fresh message control id, unique within this process and practically
// across restarts (time in microseconds + a counter), at most 20 bytes as
// HL7 2.5's MSH-10 (ST 20) allows.
std::string newControlId();

// HL7 DTM in server local time with its offset: YYYYMMDDHHMMSS+ZZZZ.
std::string formatTimestamp(std::chrono::system_clock::time_point t);

}  // namespace ductus::hl7
