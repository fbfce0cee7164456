#include "intake/http_respond.h"

#include <nlohmann/json.hpp>

#include "common/http_syntax.h"
#include "common/log.h"
#include "common/text.h"

namespace ductus::intake {

std::string respondRequestJson(const net::HttpRequest& req) {
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

namespace {

// What a person reading the engine's log needs when a script's answer is
// refused; the client only learns that the answer was bad.
net::HttpResponse refused(const std::string& why) {
  spdlog::warn("respond mode: the script's answer was refused: {}", why);
  return {500, {{"Content-Type", "text/plain"}}, "the interface's answer was not valid HTTP\n"};
}

}  // namespace

net::HttpResponse respondResponseOf(std::string_view scriptOutput) try {
  auto j = nlohmann::json::parse(scriptOutput, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {200, {}, std::string(scriptOutput)};
  net::HttpResponse resp;
  // Everything below reads a value a script chose: each is checked for its
  // type first, since nlohmann throws on a wrong one.
  if (auto st = j.find("status"); st != j.end()) {
    if (!st->is_number_integer()) return refused("status must be an integer, got " + st->dump());
    auto code = st->get<int64_t>();
    if (code < 100 || code > 599) return refused("status " + std::to_string(code) + " is not 100-599");
    resp.status = static_cast<int>(code);
  }
  if (auto hs = j.find("headers"); hs != j.end() && !hs->is_null()) {
    if (!hs->is_object()) return refused("headers must be an object");
    for (auto& [k, v] : hs->items()) {
      std::string value = v.is_string() ? v.get<std::string>() : v.dump();
      if (auto why = scriptHeaderRefusal(k, value)) return refused(*why);
      resp.headers.emplace_back(k, std::move(value));
    }
  }
  if (auto b = j.find("body"); b != j.end() && !b->is_null())
    resp.body = b->is_string() ? b->get<std::string>() : b->dump();
  return resp;
} catch (const nlohmann::json::exception& e) {
  return refused(e.what());  // a value we did not foresee: still never the supervisor's end
}

net::HttpResponse respondWithoutOutput(std::string_view outcome) {
  int status = 503;
  if (outcome == "filtered") status = 204;
  if (outcome == "quarantine") status = 500;
  return {status, {{"Content-Type", "text/plain"}}, std::string(outcome) + "\n"};
}

}  // namespace ductus::intake
