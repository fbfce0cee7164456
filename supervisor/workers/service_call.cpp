#include "supervisor/workers/service_call.h"

#include <cstdio>
#include <type_traits>
#include <variant>

namespace ductus::supervisor {

ServiceCall serviceCallOf(const proto::ServiceRequest& request) {
  ServiceCall call{};
  std::visit(
      [&](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, proto::DbQuery> || std::is_same_v<S, proto::DbExecute>) {
          call.kind = std::is_same_v<S, proto::DbQuery> ? ServiceCall::Kind::DbQuery
                                                        : ServiceCall::Kind::DbExecute;
          call.resource = s.resource;
          call.sql = s.sql;
          call.paramsJson = s.paramsJson;
        } else if constexpr (std::is_same_v<S, proto::Fetch>) {
          call.kind = ServiceCall::Kind::Fetch;
          call.url = s.url;
          call.api = s.api;
          call.initJson = s.initJson;
        } else if constexpr (std::is_same_v<S, proto::Env>) {
          call.kind = ServiceCall::Kind::Env;
          call.name = s.name;
        } else {
          static_assert(std::is_same_v<S, proto::Secret>);
          call.kind = ServiceCall::Kind::Secret;
          call.name = s.name;
        }
      },
      request.what);
  if (request.timeLeftMs > 0) call.timeLeft = std::chrono::milliseconds(request.timeLeftMs);
  return call;
}

std::optional<std::string> mockedAnswer(const ServiceCall& c) {
  switch (c.kind) {
    case ServiceCall::Kind::DbQuery:
      return std::string("[]");
    case ServiceCall::Kind::DbExecute:
      return std::string(R"({"rowCount":0})");
    case ServiceCall::Kind::Fetch:
      return std::string(R"({"status":200,"headers":{},"body":""})");
    case ServiceCall::Kind::Secret: {
      // A JSON string: quotes and backslashes escaped, control bytes dropped.
      std::string json = "\"(secret ";
      for (char ch : c.name) {
        if (ch == '"' || ch == '\\') json += '\\';
        if (static_cast<unsigned char>(ch) >= 0x20) json += ch;
      }
      return json + ")\"";
    }
    case ServiceCall::Kind::Env:
      return std::nullopt;
  }
  return std::nullopt;
}

void AllowlistedEnv::call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) {
  if (call.kind != ServiceCall::Kind::Env) {
    if (next_) return next_->call(call, std::move(reply));
    return reply(Error{"no service handler for this request"});
  }
  auto it = values_.find(call.name);
  if (it == values_.end())
    return reply(Error{"env(\"" + call.name + "\") is not a variable this interface may read"});
  // A JSON string.
  std::string json = "\"";
  for (char c : it->second) {
    if (c == '"' || c == '\\') json += '\\', json += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      json += buf;
    } else json += c;
  }
  reply(json + "\"");
}

}  // namespace ductus::supervisor
