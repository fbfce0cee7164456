#include "schema/interface_stops.h"

namespace ductus::store {
namespace {

constexpr const char* kColumns =
    "interface, to_char(stopped_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
    "stopped_by, reason";

}  // namespace

StopStatement stopInterfaceSql(const std::string& interface, const std::string& by,
                               const std::optional<std::string>& reason) {
  return {std::string("INSERT INTO interface_stops (interface, stopped_by, reason) "
                      "VALUES ($1, $2, $3) ON CONFLICT (interface) DO NOTHING RETURNING ") +
              kColumns,
          {interface, by, reason}};
}

StopStatement startInterfaceSql(const std::string& interface) {
  return {std::string("DELETE FROM interface_stops WHERE interface = $1 RETURNING ") + kColumns,
          {interface}};
}

StopStatement interfaceStopsSql() {
  return {std::string("SELECT ") + kColumns + " FROM interface_stops ORDER BY interface", {}};
}

std::vector<InterfaceStop> stopsOf(const PgResult& r) {
  std::vector<InterfaceStop> out;
  for (int i = 0; i < r.rows(); ++i)
    out.push_back({std::string(r.text(i, 0)), std::string(r.text(i, 1)), std::string(r.text(i, 2)),
                   r.optText(i, 3)});
  return out;
}

void loadInterfaceStops(PgPool& pool,
                        std::function<void(Result<std::vector<InterfaceStop>>)> done) {
  pool.acquire([done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    auto q = interfaceStopsSql();
    l->conn().query(q.sql, q.params, [l, done](Result<PgResult> r) {
      if (!r) return done(r.error());
      done(stopsOf(*r));
    });
  });
}

}  // namespace ductus::store
