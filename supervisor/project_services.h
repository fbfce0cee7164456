// ProjectServices: what interface code may reach outside its worker, as
// resources.yaml names it. db(name) runs on a connection of that named
// database, always with bound parameters, wrapped so Postgres produces the
// JSON: WITH ductus_q AS (<sql>) SELECT json_agg(ductus_q) FROM ductus_q.
// Anything not named in resources.yaml is refused.
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <string>

#include "common/config/model.h"
#include "supervisor/worker_pool.h"

namespace ductus::store {
class PgConnection;
}

namespace ductus::supervisor {

class ProjectServices : public ServiceHandler {
 public:
  ProjectServices(uv_loop_t* loop, const config::Resources& resources);
  ~ProjectServices() override;
  void call(const ServiceCall& call, std::function<void(Result<std::string>)> reply) override;

 private:
  store::PgConnection* connectionFor(const config::DatabaseResource& db);
  void database(const ServiceCall& call, std::function<void(Result<std::string>)> reply);

  uv_loop_t* loop_;
  const config::Resources& resources_;
  std::map<std::string, std::unique_ptr<store::PgConnection>> dbs_;
};

}  // namespace ductus::supervisor
