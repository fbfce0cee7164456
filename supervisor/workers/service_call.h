// A script's request for something outside its worker (a database, fetch,
// env, a secret) and who answers it. The supervisor wires Postgres, libcurl
// and resources.yaml behind ServiceHandler (supervisor/services/); `ductus
// try` and the tests answer it themselves.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/result.h"
#include "proto/worker_messages.h"

namespace ductus::supervisor {

struct ServiceCall {
  enum class Kind { DbQuery, DbExecute, Fetch, Env, Secret };
  Kind kind;
  std::string interfaceName;  // who asked (best effort after an await in a shared worker)
  std::string resource;       // db: resources.yaml name
  std::string sql;
  std::string paramsJson;
  std::string url;            // fetch: url, or the path under an api
  std::string api;            // fetch through api(name): its name
  std::string initJson;
  std::string name;           // env / secret
  // What the worker said is left of the asking call's timeout (it settles
  // the call at its deadline whatever the service does): a service should
  // not take longer. Only ever shortens the service's own timeout.
  std::optional<std::chrono::milliseconds> timeLeft;
};

// A worker's service request as the call it asks for (interfaceName left
// for the caller, which knows the worker's calls).
ServiceCall serviceCallOf(const proto::ServiceRequest& request);

class ServiceHandler {
 public:
  virtual ~ServiceHandler() = default;
  // Answers once, on the loop, with JSON text (or an Error whose message
  // contains "[ductus:transient]" when the call should be retried). May
  // answer after the asking worker is gone: the pool ignores such replies.
  virtual void call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) = 0;
};

// What a dry run's script gets from a service that would reach outside
// (`ductus try`, and the engine's POST /interfaces/{name}/try): an empty,
// harmless answer, so the script runs to its end without querying,
// changing or fetching anything. db().query: []; db().execute: {rowCount:
// 0}; fetch() and api(): 200 with an empty body; secret(): "(secret NAME)",
// never the secret (a dry run's output is shown to its caller). nullopt for
// env(), which only reads what the interface may read anyway.
std::optional<std::string> mockedAnswer(const ServiceCall& call);

// Answers env() from an allowlist directly and passes the rest on.
class AllowlistedEnv : public ServiceHandler {
 public:
  AllowlistedEnv(std::map<std::string, std::string> values, ServiceHandler* next)
      : values_(std::move(values)), next_(next) {}
  void call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) override;

 private:
  std::map<std::string, std::string> values_;
  ServiceHandler* next_;
};

}  // namespace ductus::supervisor
