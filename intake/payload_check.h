// What intake refuses to store for a format, said with where the payload is
// wrong: the one check the HTTP queue source (http_body_check.h: 400), the
// API's edit (400 invalid_payload) and its dry run (POST .../try) make, so
// an operator's corrected copy passes exactly what a sender's message must.
// HL7 v2: an MLLP framing byte anywhere (hl7::mllp::refuseFramingBytes),
// then the MSH and its delimiters as hl7::MessageView::parse reads them (the
// MLLP listener's AR). JSON: a document nlohmann accepts, for payloads up to
// kMaxCheckedJsonBytes (bigger ones are left to the transform, as over
// HTTP). Other formats: only the size. Keys are never refused: an ordering
// or dedupe key missing from a message is an empty key, as at intake.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/config/model.h"

namespace ductus::intake {

// JSON payloads up to this size are parsed to check them (5-8 ms a MB, on
// the loop); bigger ones are left to the transform.
constexpr size_t kMaxCheckedJsonBytes = size_t{1} << 20;

struct PayloadProblem {
  enum class Kind {
    TooLarge,  // over max_message_size
    Framing,   // an MLLP framing byte (HL7)
    NotHl7,    // no MSH, or an MSH whose delimiters can't be read
    NotJson,
  };
  Kind kind = Kind::NotHl7;
  std::string text;
  // Where, as far as the check knows: the line (from 1; HL7 segments end
  // in \r, \n or \r\n, each one line), the column (from 1, JSON), the
  // segment ("MSH") and the field ("MSH.2"). 0 or "" when not known.
  int line = 0;
  int column = 0;
  std::string segment;
  std::string field;
};

// Why intake refuses `payload` for `format`, or nullopt when it stores it.
// maxBytes 0: no size check (the HTTP server bounds a body itself).
std::optional<PayloadProblem> checkPayload(config::Format format, std::string_view payload,
                                           uint64_t maxBytes = 0);

}  // namespace ductus::intake
