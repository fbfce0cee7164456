#include "schema/destination_pauses.h"

#include <memory>

#include <nlohmann/json.hpp>

namespace ductus::store {
namespace {

constexpr const char* kIso = "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'";

std::string iso(const std::string& expr) {
  return "to_char(" + expr + " AT TIME ZONE 'UTC', " + kIso + ")";
}

// The columns pausesOf() reads, of `p` joined to its destination `dst` and
// interface `i`.
std::string columns() {
  return "p.destination_id, i.name, dst.name, " + iso("p.paused_at") +
         ", p.paused_by, p.reasons::text";
}

}  // namespace

PauseStatement pauseDestinationSql(const std::string& interface, const std::string& destination,
                                   const std::string& by, const std::string& reason) {
  // The CTE's RETURNING has only the pause's own columns: the names come
  // from joining it again.
  return {"WITH p AS (INSERT INTO destination_pauses AS dp (destination_id, paused_by, reasons) "
          "SELECT dst.id, $3, jsonb_build_array(jsonb_build_object('at', " +
              iso("now()") +
              ", 'by', $3::text, 'reason', $4::text)) "
              "FROM destinations dst JOIN interfaces i ON i.id = dst.interface_id "
              "WHERE i.name = $1 AND dst.name = $2 "
              "ON CONFLICT (destination_id) DO UPDATE SET reasons = dp.reasons || "
              "EXCLUDED.reasons RETURNING *) "
              "SELECT " +
              columns() +
              " FROM p JOIN destinations dst ON dst.id = p.destination_id "
              "JOIN interfaces i ON i.id = dst.interface_id",
          {interface, destination, by, reason}};
}

PauseStatement resumeDestinationSql(const std::string& interface,
                                    const std::string& destination) {
  return {"WITH p AS (DELETE FROM destination_pauses dp USING destinations d, interfaces f "
          "WHERE dp.destination_id = d.id AND f.id = d.interface_id AND f.name = $1 "
          "AND d.name = $2 RETURNING dp.*) "
          "SELECT " +
              columns() +
              " FROM p JOIN destinations dst ON dst.id = p.destination_id "
              "JOIN interfaces i ON i.id = dst.interface_id",
          {interface, destination}};
}

PauseStatement pausesSql() {
  return {"SELECT " + columns() +
              " FROM destination_pauses p JOIN destinations dst ON dst.id = p.destination_id "
              "JOIN interfaces i ON i.id = dst.interface_id ORDER BY p.destination_id",
          {}};
}

std::vector<DestinationPause> pausesOf(const PgResult& r) {
  std::vector<DestinationPause> out;
  for (int i = 0; i < r.rows(); ++i) {
    DestinationPause p;
    p.destinationId = r.integer(i, 0);
    p.interfaceName = std::string(r.text(i, 1));
    p.destinationName = std::string(r.text(i, 2));
    p.pausedAt = std::string(r.text(i, 3));
    p.pausedBy = std::string(r.text(i, 4));
    auto reasons = nlohmann::json::parse(r.text(i, 5), nullptr, false);
    if (reasons.is_array())
      for (auto& e : reasons) {
        if (!e.is_object()) continue;
        p.reasons.push_back({e.value("at", std::string()), e.value("by", std::string()),
                             e.value("reason", std::string())});
      }
    out.push_back(std::move(p));
  }
  return out;
}

void loadPauses(PgPool& pool, std::function<void(Result<std::vector<DestinationPause>>)> done) {
  pool.acquire([done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    auto q = pausesSql();
    l->conn().query(q.sql, q.params, [l, done](Result<PgResult> r) {
      if (!r) return done(r.error());
      done(pausesOf(*r));
    });
  });
}

}  // namespace ductus::store
