#include "intake/http_respond.h"

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace ductus::intake {

std::string respondRequestJson(const HttpRequest& req) {
  nlohmann::json env;
  env["method"] = req.method;
  env["path"] = req.path;
  nlohmann::json headers = nlohmann::json::object();
  for (auto& [k, v] : req.headers) headers[k] = asText(v);
  env["headers"] = headers;
  env["query"] = asText(req.query);
  env["body"] = asText(req.body);
  return env.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse respondResponseOf(std::string_view scriptOutput) {
  auto j = nlohmann::json::parse(scriptOutput, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {200, {}, std::string(scriptOutput)};
  HttpResponse resp;
  resp.status = j.value("status", 200);
  if (j.contains("headers") && j["headers"].is_object())
    for (auto& [k, v] : j["headers"].items())
      resp.headers.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
  if (j.contains("body"))
    resp.body = j["body"].is_string() ? j["body"].get<std::string>() : j["body"].dump();
  return resp;
}

HttpResponse respondWithoutOutput(std::string_view outcome) {
  int status = 503;
  if (outcome == "filtered") status = 204;
  if (outcome == "quarantine") status = 500;
  return {status, {{"Content-Type", "text/plain"}}, std::string(outcome) + "\n"};
}

}  // namespace ductus::intake
