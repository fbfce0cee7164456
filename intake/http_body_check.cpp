#include "intake/http_body_check.h"

#include <cctype>
#include <string>

#include "common/text.h"

namespace ductus::intake {
namespace {

// "Application/JSON; charset=utf-8" -> "application/json".
std::string mediaType(std::string_view contentType) {
  std::string_view t = contentType.substr(0, contentType.find(';'));
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  return asciiLower(t);
}

bool readable(config::Format format, const std::string& type) {
  if (type.empty() || type == "application/octet-stream") return true;
  switch (format) {
    case config::Format::Json:
      return type == "application/json" || type == "text/json" || type == "text/plain" ||
             type.ends_with("+json");
    case config::Format::Xml:
      return type == "application/xml" || type == "text/xml" || type == "text/plain" ||
             type.ends_with("+xml");
    case config::Format::Csv:
      // Windows labels CSV files as Excel's.
      return type == "text/csv" || type == "application/csv" || type == "text/plain" ||
             type == "application/vnd.ms-excel";
    case config::Format::Hl7v2:
      // x-application/hl7-v2+er7, application/hl7-v2, application/edi-hl7, ...
      return type.rfind("text/", 0) == 0 || type.find("hl7") != std::string::npos;
    case config::Format::Text:
      return type.rfind("text/", 0) == 0 || type == "application/json" ||
             type == "application/xml" || type.ends_with("+json") || type.ends_with("+xml");
  }
  return true;
}

net::HttpResponse plain(int status, std::string text) {
  return net::HttpResponse{status, {{"Content-Type", "text/plain"}}, std::move(text) + "\n"};
}

}  // namespace

std::optional<net::HttpResponse> refuseBody(config::Format format, const net::HttpRequest& req) {
  auto ct = req.header("content-type");
  std::string type = ct ? mediaType(*ct) : std::string();
  if (!readable(format, type))
    return plain(
        415, "this interface reads " + std::string(config::formatName(format)) + ", not " + type);
  // The body itself: what intake refuses for the format (payload_check.h).
  // JSON is checked only up to kMaxCheckedJsonBytes: this runs on the
  // supervisor's loop, and a bigger body that isn't JSON is still caught,
  // by its transform (quarantined).
  auto problem = checkPayload(format, req.body);
  if (!problem) return std::nullopt;
  switch (problem->kind) {
    case PayloadProblem::Kind::NotJson:
      return plain(400, "the body is not JSON: " + problem->text);
    case PayloadProblem::Kind::Framing:
      return plain(400, "the body is refused: " + problem->text);
    case PayloadProblem::Kind::NotHl7:
      return plain(400, "the body is not an HL7 v2 message: " + problem->text);
    case PayloadProblem::Kind::TooLarge:
      break;  // not asked: the server bounds a body
  }
  return plain(400, problem->text);
}

}  // namespace ductus::intake
