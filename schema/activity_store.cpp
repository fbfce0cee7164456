#include "schema/activity_store.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "schema/pg_values.h"

namespace ductus::store {
namespace {

using pgvalue::arrayLiteral;
using pgvalue::microsSql;
using pgvalue::momentAt;
using pgvalue::momentParam;
using pgvalue::momentSql;

// {1.5,NULL,...} for a float8[] column; a value that is no finite number
// is stored as NULL (not learned). Empty: NULL (keep the stored one).
Param baselineLiteral(const Baseline& b) {
  if (b.empty()) return std::nullopt;
  std::string s = "{";
  for (size_t i = 0; i < b.size(); ++i) {
    if (i) s += ',';
    if (!b[i] || !std::isfinite(*b[i])) {
      s += "NULL";
      continue;
    }
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, *b[i]);
    s.append(buf, ec == std::errc() ? end : buf);
  }
  return s + "}";
}

// float8[] text output ("{1.5,NULL,2}", PostgreSQL writes the shortest
// text that reads back exactly) into a baseline; NULL: empty.
Baseline baselineOf(const PgResult& r, int row, int col) {
  Baseline out;
  if (r.isNull(row, col)) return out;
  std::string text(r.text(row, col));
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return out;
  std::string_view body(text.data() + 1, text.size() - 2);
  while (!body.empty()) {
    size_t comma = body.find(',');
    std::string item(body.substr(0, comma));
    if (item == "NULL") {
      out.push_back(std::nullopt);
    } else {
      char* end = nullptr;
      double v = std::strtod(item.c_str(), &end);
      out.push_back(end && *end == '\0' && std::isfinite(v) ? std::optional<double>(v)
                                                            : std::nullopt);
    }
    if (comma == std::string_view::npos) break;
    body.remove_prefix(comma + 1);
  }
  return out;
}

std::string loadInterfacesSql() {
  return "SELECT interface_id, " + microsSql("last_received") + ", " + microsSql("watched_since") +
         " FROM interface_activity ORDER BY interface_id";
}

std::string loadDestinationsSql() {
  return "SELECT destination_id, " + microsSql("last_sent") + ", " + microsSql("last_error") +
         ", last_error_text, baseline_in::text, baseline_send_ms::text "
         "FROM destination_activity ORDER BY destination_id";
}

// GREATEST and LEAST ignore NULL: a side that has no time keeps the other's.
std::string saveInterfacesSql() {
  return "INSERT INTO interface_activity AS a (interface_id, last_received, watched_since) "
         "SELECT u.id::int8, " +
         momentSql("u.received") + ", " + momentSql("u.watched") +
         " FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, received, watched) "
         "ON CONFLICT (interface_id) DO UPDATE SET "
         "last_received = GREATEST(a.last_received, EXCLUDED.last_received), "
         "watched_since = LEAST(a.watched_since, EXCLUDED.watched_since)";
}

// The error's text goes with the later error time; a baseline given
// replaces the stored one (a NULL one keeps it).
std::string saveDestinationsSql() {
  return "INSERT INTO destination_activity AS a (destination_id, last_sent, last_error, "
         "last_error_text, baseline_in, baseline_send_ms) "
         "SELECT u.id::int8, " +
         momentSql("u.sent") + ", " + momentSql("u.error") +
         ", u.text, u.bin::float8[], u.bsend::float8[] "
         "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) "
         "AS u(id, sent, error, text, bin, bsend) "
         "ON CONFLICT (destination_id) DO UPDATE SET "
         "last_sent = GREATEST(a.last_sent, EXCLUDED.last_sent), "
         "last_error = GREATEST(a.last_error, EXCLUDED.last_error), "
         "last_error_text = CASE WHEN EXCLUDED.last_error IS NOT NULL AND "
         "(a.last_error IS NULL OR EXCLUDED.last_error > a.last_error) "
         "THEN EXCLUDED.last_error_text ELSE a.last_error_text END, "
         "baseline_in = COALESCE(EXCLUDED.baseline_in, a.baseline_in), "
         "baseline_send_ms = COALESCE(EXCLUDED.baseline_send_ms, a.baseline_send_ms)";
}

}  // namespace

void loadActivity(PgPool& pool, std::function<void(Result<ActivityRows>)> done) {
  pool.acquire([done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(loadInterfacesSql(), {}, [l, done](Result<PgResult> ri) {
      if (!ri) return done(ri.error());
      auto out = std::make_shared<ActivityRows>();
      for (int i = 0; i < ri->rows(); ++i)
        out->interfaces.push_back({ri->integer(i, 0), momentAt(*ri, i, 1), momentAt(*ri, i, 2)});
      l->conn().query(loadDestinationsSql(), {}, [l, out, done](Result<PgResult> rd) {
        if (!rd) return done(rd.error());
        for (int i = 0; i < rd->rows(); ++i) {
          DestinationActivityRow d;
          d.destinationId = rd->integer(i, 0);
          d.lastSent = momentAt(*rd, i, 1);
          d.lastError = momentAt(*rd, i, 2);
          d.lastErrorText = rd->optText(i, 3).value_or("");
          d.baselineIn = baselineOf(*rd, i, 4);
          d.baselineSendMs = baselineOf(*rd, i, 5);
          out->destinations.push_back(std::move(d));
        }
        done(std::move(*out));
      });
    });
  });
}

void saveActivity(PgPool& pool, ActivityChanges changes, std::function<void(Status)> done) {
  struct Statement {
    std::string sql;
    std::vector<Param> params;
  };
  std::vector<Statement> statements;
  if (!changes.interfaces.empty()) {
    std::vector<Param> ids, received, watched;
    for (auto& i : changes.interfaces) {
      ids.push_back(std::to_string(i.interfaceId));
      received.push_back(momentParam(i.lastReceived));
      watched.push_back(momentParam(i.watchedSince));
    }
    statements.push_back(
        {saveInterfacesSql(), {arrayLiteral(ids), arrayLiteral(received), arrayLiteral(watched)}});
  }
  if (!changes.destinations.empty()) {
    std::vector<Param> ids, sent, error, text, in, send;
    for (auto& d : changes.destinations) {
      ids.push_back(std::to_string(d.destinationId));
      sent.push_back(momentParam(d.lastSent));
      error.push_back(momentParam(d.lastError));
      text.push_back(d.lastError ? Param(pgvalue::boundedText(d.lastErrorText, kMaxErrorTextBytes))
                                 : std::nullopt);
      in.push_back(baselineLiteral(d.baselineIn));
      send.push_back(baselineLiteral(d.baselineSendMs));
    }
    statements.push_back({saveDestinationsSql(),
                          {arrayLiteral(ids), arrayLiteral(sent), arrayLiteral(error),
                           arrayLiteral(text), arrayLiteral(in), arrayLiteral(send)}});
  }
  if (statements.empty()) return done({});
  pool.acquire([statements = std::move(statements), done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    // Each statement stands alone: times only move forward, so a first one
    // kept when the second fails is still true.
    auto left = std::make_shared<size_t>(statements.size());
    auto failed = std::make_shared<std::optional<Error>>();
    for (auto& s : statements)
      l->conn().query(s.sql, s.params, [l, left, failed, done](Result<PgResult> r) {
        if (!r && !*failed) *failed = r.error();
        if (--*left > 0) return;
        if (*failed) return done(**failed);
        done({});
      });
  });
}

}  // namespace ductus::store
