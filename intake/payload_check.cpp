#include "intake/payload_check.h"

#include <nlohmann/json.hpp>

#include "common/hl7/message.h"
#include "common/hl7/mllp.h"
#include "common/text.h"

namespace ductus::intake {
namespace {

using Kind = PayloadProblem::Kind;

// A problem whose place the caller fills in, if it knows it.
PayloadProblem problem(Kind kind, std::string text) {
  PayloadProblem p;
  p.kind = kind;
  p.text = std::move(text);
  return p;
}

// The line (from 1) and column (from 1) of byte `at`: \r\n is one break,
// and a lone \r or \n one each, as the HL7 reader splits segments.
std::pair<int, int> lineAndColumn(std::string_view text, size_t at) {
  int line = 1;
  size_t start = 0;
  for (size_t i = 0; i < at && i < text.size(); ++i) {
    char c = text[i];
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    if (c == '\r' || c == '\n') {
      ++line;
      start = i + 1;
    }
  }
  return {line, static_cast<int>(at - start) + 1};
}

// The segment name of the line that holds byte `at`: its first three
// bytes, when they look like one.
std::string segmentAt(std::string_view text, size_t at) {
  size_t start = text.find_last_of("\r\n", at == 0 ? 0 : at - 1);
  start = (start == std::string_view::npos || at == 0) ? 0 : start + 1;
  std::string_view name = text.substr(start, 3);
  if (name.size() != 3) return {};
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return {};
  return std::string(name);
}

std::optional<PayloadProblem> checkHl7(std::string_view payload) {
  // Framing bytes first: a message framed as it is would reach an MLLP
  // receiver as two.
  if (auto s = hl7::mllp::refuseFramingBytes(payload); !s) {
    size_t at = payload.find_first_of(std::string_view("\x0b\x1c", 2));
    PayloadProblem p = problem(Kind::Framing, s.error().message);
    std::tie(p.line, p.column) = lineAndColumn(payload, at);
    p.segment = segmentAt(payload, at);
    return p;
  }
  auto why = hl7::whyUnreadable(payload);
  if (!why) return std::nullopt;
  PayloadProblem p = problem(Kind::NotHl7, why->text);
  if (why->mshAt != std::string_view::npos) {
    p.line = lineAndColumn(payload, why->mshAt).first;
    p.segment = "MSH";
    p.field = why->field;
  } else {
    p.line = 1;  // where the MSH must be
  }
  return p;
}

std::optional<PayloadProblem> checkJson(std::string_view payload) {
  if (payload.size() > kMaxCheckedJsonBytes) return std::nullopt;
  // ISO-8859-1 JSON is read as such downstream (the worker, the keys), so
  // it is checked as its characters.
  std::string text = asText(payload);
  if (nlohmann::json::accept(text)) return std::nullopt;
  // Parsed again only to say where it went wrong.
  try {
    [[maybe_unused]] auto doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    PayloadProblem p = problem(Kind::NotJson, e.what());
    // nlohmann counts the byte after the one it stopped at.
    size_t at = e.byte > 0 ? e.byte - 1 : 0;
    std::tie(p.line, p.column) = lineAndColumn(text, at);
    return p;
  }
  return problem(Kind::NotJson, "not JSON");
}

}  // namespace

std::optional<PayloadProblem> checkPayload(config::Format format, std::string_view payload,
                                           uint64_t maxBytes) {
  if (maxBytes && payload.size() > maxBytes)
    return problem(Kind::TooLarge, "the message is " + std::to_string(payload.size()) +
                                       " bytes, over the " + std::to_string(maxBytes) +
                                       "-byte limit (max_message_size)");
  switch (format) {
    case config::Format::Hl7v2:
      return checkHl7(payload);
    case config::Format::Json:
      return checkJson(payload);
    default:
      return std::nullopt;
  }
}

}  // namespace ductus::intake
