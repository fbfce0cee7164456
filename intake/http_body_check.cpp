#include "intake/http_body_check.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <string>

#include "common/hl7/message.h"
#include "common/hl7/mllp.h"
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
  // ISO-8859-1 JSON is read as such downstream (the worker, the keys), so
  // it is checked the same way here. Only up to kMaxCheckedJsonBytes: this
  // runs on the supervisor's loop, and a bigger body that isn't JSON is
  // still caught, by its transform (quarantined).
  if (format == config::Format::Json && req.body.size() <= kMaxCheckedJsonBytes &&
      !nlohmann::json::accept(asText(req.body))) {
    // Parsed again only to say where it went wrong.
    try {
      [[maybe_unused]] auto doc = nlohmann::json::parse(asText(req.body));
    } catch (const nlohmann::json::parse_error& e) {
      return plain(400, std::string("the body is not JSON: ") + e.what());
    }
    return plain(400, "the body is not JSON");
  }
  if (format == config::Format::Hl7v2) {
    // Framing bytes in a body would leave an MLLP destination as two
    // messages, the second never stored (hl7::mllp::refuseFramingBytes).
    if (auto s = hl7::mllp::refuseFramingBytes(req.body); !s)
      return plain(400, "the body is refused: " + s.error().message);
    if (auto m = hl7::MessageView::parse(req.body); !m)
      return plain(400, "the body is not an HL7 v2 message: " + m.error().message);
  }
  return std::nullopt;
}

}  // namespace ductus::intake
