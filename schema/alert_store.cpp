#include "schema/alert_store.h"

#include <algorithm>
#include <memory>

#include "schema/pg_transaction.h"
#include "schema/pg_values.h"

namespace ductus::store {
namespace {

using pgvalue::arrayLiteral;
using pgvalue::microsSql;
using pgvalue::momentAt;
using pgvalue::momentParam;
using pgvalue::momentSql;
using Results = std::vector<PgResult>;

// The columns alertAt() reads, of alert_state `a`.
std::string alertColumns() {
  return "a.id, a.interface_name, a.destination_name, a.certificate_name, a.phase, a.state, "
         "a.severity, " +
         microsSql("a.opened_at") + ", " + microsSql("a.changed_at") + ", " +
         microsSql("a.good_since") + ", " + microsSql("a.remind_at") + ", " +
         microsSql("a.acknowledged_at") + ", a.acknowledged_by, " + microsSql("a.silenced_until") +
         ", a.silenced_by, a.told, a.stage, a.rev";
}

monitor::Phase phaseOf(std::string_view s) {
  return s == "firing"       ? monitor::Phase::Firing
         : s == "recovering" ? monitor::Phase::Recovering
                             : monitor::Phase::Ok;
}

monitor::AlertState alertAt(const PgResult& r, int i) {
  monitor::AlertState a;
  a.id = r.integer(i, 0);
  a.subject.interface = std::string(r.text(i, 1));
  a.subject.destination = std::string(r.text(i, 2));
  a.subject.certificate = std::string(r.text(i, 3));
  a.phase = phaseOf(r.text(i, 4));
  a.state = monitor::parseState(r.text(i, 5)).value_or(monitor::State::Ok);
  a.severity = monitor::parseSeverity(r.text(i, 6)).value_or(monitor::Severity::Info);
  a.openedAt = momentAt(r, i, 7);
  a.changedAt = momentAt(r, i, 8);
  a.goodSince = momentAt(r, i, 9);
  a.remindAt = momentAt(r, i, 10);
  a.acknowledgedAt = momentAt(r, i, 11);
  a.acknowledgedBy = std::string(r.text(i, 12));
  a.silencedUntil = momentAt(r, i, 13);
  a.silencedBy = std::string(r.text(i, 14));
  a.told = r.text(i, 15) == "t";
  a.stage = static_cast<int>(r.integer(i, 16));
  a.rev = r.integer(i, 17);
  return a;
}

// The fields a step writes, $first.. in this order.
std::vector<Param> stateParams(const monitor::AlertState& a) {
  return {std::string(monitor::phaseName(a.phase)),
          std::string(monitor::stateName(a.state)),
          std::string(monitor::severityName(a.severity)),
          momentParam(a.openedAt),
          momentParam(a.changedAt),
          momentParam(a.goodSince),
          momentParam(a.remindAt),
          momentParam(a.acknowledgedAt),
          a.acknowledgedBy,
          momentParam(a.silencedUntil),
          a.silencedBy,
          a.told ? "true" : "false",
          std::to_string(a.stage)};
}

std::string insertAlertSql() {
  return "INSERT INTO alert_state AS a (subject, interface_name, destination_name, "
         "certificate_name, phase, state, severity, opened_at, changed_at, good_since, "
         "remind_at, acknowledged_at, acknowledged_by, silenced_until, silenced_by, told, stage) "
         "VALUES ($1, $2, $3, $4, $5, $6, $7, " +
         momentSql("$8") + ", " + momentSql("$9") + ", " + momentSql("$10") + ", " +
         momentSql("$11") + ", " + momentSql("$12") + ", $13, " + momentSql("$14") +
         ", $15, $16::bool, $17::int) ON CONFLICT (subject) DO NOTHING RETURNING " + alertColumns();
}

std::string updateAlertSql() {
  return "UPDATE alert_state a SET phase = $3, state = $4, severity = $5, opened_at = " +
         momentSql("$6") + ", changed_at = " + momentSql("$7") +
         ", good_since = " + momentSql("$8") + ", remind_at = " + momentSql("$9") +
         ", acknowledged_at = " + momentSql("$10") +
         ", acknowledged_by = $11, silenced_until = " + momentSql("$12") +
         ", silenced_by = $13, told = $14::bool, stage = $15::int, rev = a.rev + 1 "
         "WHERE a.id = $1::int8 AND a.rev = $2::int8 RETURNING " +
         alertColumns();
}

// The event of a change, of the alert row `r` (alertColumns) as changed.
// Its time is the database's: one clock for every engine's events.
SqlStatement eventStatement(const PgResult& r, const std::string& change,
                            const std::string& reason) {
  return {
      "INSERT INTO alert_events (alert_id, change, phase, state, severity, reason) "
      "VALUES ($1::int8, $2, $3, $4, $5, $6) RETURNING id",
      {std::string(r.text(0, 0)), change, std::string(r.text(0, 4)), std::string(r.text(0, 5)),
       std::string(r.text(0, 6)), reason}};
}

SqlStatement cancelStatement(const std::string& alertId, const std::string& why) {
  return {
      "UPDATE alert_deliveries SET given_up = true, lease_until = NULL, last_error = $2 "
      "WHERE alert_id = $1::int8 AND sent_at IS NULL AND NOT given_up",
      {alertId, why}};
}

SqlStatement outboxStatement(const std::string& alertId, const std::string& eventId,
                             const std::vector<OutboxRow>& rows) {
  std::vector<Param> channel, kind, target, subject, body, type, due;
  for (auto& n : rows) {
    channel.push_back(n.channel);
    kind.push_back(n.kind);
    target.push_back(n.target);
    subject.push_back(n.subject);
    body.push_back(n.body);
    type.push_back(n.contentType.empty() ? "text/plain" : n.contentType);
    due.push_back(n.due == AlertTime{} ? std::nullopt : momentParam(n.due));
  }
  return {
      "INSERT INTO alert_deliveries (alert_id, event_id, channel, kind, target, subject, "
      "body, content_type, due_at) SELECT $1::int8, $2::int8, u.channel, u.kind, u.target, "
      "u.subject, u.body, u.type, coalesce(" +
          momentSql("u.due") +
          ", now()) FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], "
          "$8::text[], $9::text[]) AS u(channel, kind, target, subject, body, type, due)",
      {alertId, eventId, arrayLiteral(channel), arrayLiteral(kind), arrayLiteral(target),
       arrayLiteral(subject), arrayLiteral(body), arrayLiteral(type), arrayLiteral(due)}};
}

// What a step's transaction ends with when the compare-and-set found
// another engine's change: rolled back, answered as "not applied".
constexpr const char* kNotApplied = "the alert changed since it was read";

std::string outboxColumns() {
  return "o.id, o.alert_id, coalesce(o.event_id, 0), o.channel, o.kind, o.target, o.subject, "
         "o.body, o.content_type, " +
         microsSql("o.due_at") + ", o.attempts, coalesce(o.last_error, '')";
}

OutboxRow outboxAt(const PgResult& r, int i) {
  OutboxRow o;
  o.id = r.integer(i, 0);
  o.alertId = r.integer(i, 1);
  o.eventId = r.integer(i, 2);
  o.channel = std::string(r.text(i, 3));
  o.kind = std::string(r.text(i, 4));
  o.target = std::string(r.text(i, 5));
  o.subject = std::string(r.text(i, 6));
  o.body = std::string(r.text(i, 7));
  o.contentType = std::string(r.text(i, 8));
  o.due = momentAt(r, i, 9).value_or(AlertTime{});
  o.attempts = static_cast<int>(r.integer(i, 10));
  o.lastError = std::string(r.text(i, 11));
  return o;
}

// One statement on a leased connection, its result handed to `then`.
void runOne(PgPool& pool, std::string sql, std::vector<Param> params,
            std::function<void(Result<PgResult>)> then) {
  pool.acquire([sql = std::move(sql), params = std::move(params),
                then = std::move(then)](Result<PgPool::LeasePtr> lease) {
    if (!lease) return then(lease.error());
    auto l = *lease;
    l->conn().query(sql, params, [l, then](Result<PgResult> r) { then(std::move(r)); });
  });
}

// An operator's change of one firing alert: lock it, change it, its event,
// the step `more` may add (after the event), the audit row.
void operatorChange(PgPool& pool, int64_t alertId, std::string setSql, std::vector<Param> setParams,
                    std::string change, std::string reason,
                    std::function<std::optional<SqlStatement>(const std::string& id)> more,
                    AuditStatement<monitor::AlertState> audit,
                    std::function<void(Result<monitor::AlertState>)> done) {
  pool.acquire([=](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    std::string id = std::to_string(alertId);
    std::vector<TxStep> steps;
    steps.push_back(
        fixedStep({"SELECT a.phase FROM alert_state a WHERE a.id = $1::int8 FOR UPDATE", {id}}));
    steps.push_back([=](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0) return Error{"no alert " + id, ErrorKind::NotFound};
      if (r[0].text(0, 0) != "firing")
        return Error{"alert " + id + " is not firing", ErrorKind::Conflict};
      std::vector<Param> params{id};
      for (auto& p : setParams) params.push_back(p);
      return SqlStatement{"UPDATE alert_state a SET " + setSql +
                              ", rev = a.rev + 1 WHERE a.id = $1::int8 RETURNING " + alertColumns(),
                          params};
    });
    steps.push_back([=](const Results& r) -> Result<SqlStatement> {
      return eventStatement(r[1], change, reason);
    });
    auto extra = more(id);
    if (extra) steps.push_back(fixedStep(*extra));
    steps.push_back([=](const Results& r) { return audit(alertAt(r[1], 0)); });
    runTransactionRetried(
        l, std::move(steps),
        [l, done](Result<Results> r) {
          if (!r) return done(r.error());
          done(alertAt((*r)[1], 0));
        },
        kActionTries);
  });
}

}  // namespace

void loadAlerts(PgPool& pool, std::function<void(Result<std::vector<monitor::AlertState>>)> done) {
  runOne(pool, "SELECT " + alertColumns() + " FROM alert_state a ORDER BY a.id", {},
         [done](Result<PgResult> r) {
           if (!r) return done(r.error());
           std::vector<monitor::AlertState> out;
           for (int i = 0; i < r->rows(); ++i) out.push_back(alertAt(*r, i));
           done(std::move(out));
         });
}

void applyStep(PgPool& pool, AlertWrite write, std::function<void(Result<bool>)> done) {
  auto w = std::make_shared<AlertWrite>(std::move(write));
  pool.acquire([w, done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    std::vector<TxStep> steps;
    auto fields = stateParams(w->after);
    if (w->before.id == 0) {
      const auto& s = w->after.subject;
      std::vector<Param> p{s.key(), s.interface, s.destination, s.certificate};
      p.insert(p.end(), fields.begin(), fields.end());
      steps.push_back(fixedStep({insertAlertSql(), std::move(p)}));
    } else {
      std::vector<Param> p{std::to_string(w->before.id), std::to_string(w->before.rev)};
      p.insert(p.end(), fields.begin(), fields.end());
      steps.push_back(fixedStep({updateAlertSql(), std::move(p)}));
    }
    steps.push_back([w](const Results& r) -> Result<SqlStatement> {
      if (r[0].rows() == 0) return Error{kNotApplied, ErrorKind::Conflict};
      return eventStatement(r[0], w->change, w->reason);
    });
    // Cancelled before this step's own notifications are written.
    if (w->cancelPending)
      steps.push_back([](const Results& r) -> Result<SqlStatement> {
        return cancelStatement(std::string(r[0].text(0, 0)), "recovered");
      });
    if (!w->notifications.empty())
      steps.push_back([w](const Results& r) -> Result<SqlStatement> {
        return outboxStatement(std::string(r[0].text(0, 0)), std::string(r[1].text(0, 0)),
                               w->notifications);
      });
    runTransactionRetried(
        l, std::move(steps),
        [l, done](Result<Results> r) {
          if (!r) {
            if (r.error().kind == ErrorKind::Conflict && r.error().message == kNotApplied)
              return done(false);
            return done(r.error());
          }
          done(true);
        },
        kActionTries);
  });
}

void claimDue(PgPool& pool, int limit, std::chrono::seconds lease,
              std::function<void(Result<std::vector<OutboxRow>>)> done) {
  if (limit < 1) return done(std::vector<OutboxRow>{});
  runOne(pool,
         "UPDATE alert_deliveries o SET lease_until = now() + $2::int8 * interval '1 second', "
         "attempts = o.attempts + 1 FROM (SELECT id FROM alert_deliveries "
         "WHERE sent_at IS NULL AND NOT given_up AND due_at <= now() "
         "AND (lease_until IS NULL OR lease_until <= now()) ORDER BY due_at, id LIMIT $1::int "
         "FOR UPDATE SKIP LOCKED) c WHERE o.id = c.id RETURNING " +
             outboxColumns(),
         {std::to_string(limit), std::to_string(lease.count())}, [done](Result<PgResult> r) {
           if (!r) return done(r.error());
           std::vector<OutboxRow> out;
           for (int i = 0; i < r->rows(); ++i) out.push_back(outboxAt(*r, i));
           std::sort(out.begin(), out.end(), [](const OutboxRow& a, const OutboxRow& b) {
             return a.due != b.due ? a.due < b.due : a.id < b.id;
           });
           done(std::move(out));
         });
}

void markSent(PgPool& pool, int64_t id, std::function<void(Status)> done) {
  runOne(pool,
         "UPDATE alert_deliveries SET sent_at = now(), lease_until = NULL, last_error = NULL "
         "WHERE id = $1::int8",
         {std::to_string(id)}, [done](Result<PgResult> r) {
           if (!r) return done(r.error());
           done({});
         });
}

void markFailed(PgPool& pool, int64_t id, std::string error, AlertTime nextDue, bool giveUp,
                std::function<void(Status)> done) {
  runOne(pool,
         "UPDATE alert_deliveries SET lease_until = NULL, last_error = $2, due_at = " +
             momentSql("$3") + ", given_up = $4::bool WHERE id = $1::int8",
         {std::to_string(id), pgvalue::boundedText(error, kMaxOutboxErrorBytes),
          momentParam(nextDue), giveUp ? "true" : "false"},
         [done](Result<PgResult> r) {
           if (!r) return done(r.error());
           done({});
         });
}

void listAlerts(PgPool& pool, std::function<void(Result<std::vector<AlertListItem>>)> done) {
  pool.acquire([done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    l->conn().query(
        "SELECT " + alertColumns() +
            " FROM alert_state a ORDER BY a.phase = 'ok', a.changed_at DESC NULLS LAST, a.id DESC "
            "LIMIT $1::int",
        {std::to_string(kMaxAlertsListed)}, [l, done](Result<PgResult> ra) {
          if (!ra) return done(ra.error());
          auto out = std::make_shared<std::vector<AlertListItem>>();
          std::vector<Param> ids;
          for (int i = 0; i < ra->rows(); ++i) {
            out->push_back({alertAt(*ra, i), {}});
            ids.push_back(std::to_string(out->back().alert.id));
          }
          if (out->empty()) return done(std::move(*out));
          l->conn().query(
              "SELECT a.ord, " + microsSql("e.at") +
                  ", e.change, e.phase, e.state, e.severity, e.reason "
                  "FROM unnest($1::int8[]) WITH ORDINALITY AS a(id, ord) CROSS JOIN LATERAL ("
                  "SELECT * FROM alert_events WHERE alert_id = a.id ORDER BY id DESC "
                  "LIMIT $2::int) e ORDER BY a.ord, e.id DESC",
              {arrayLiteral(ids), std::to_string(kEventsPerAlert)},
              [l, out, done](Result<PgResult> re) {
                if (!re) return done(re.error());
                for (int i = 0; i < re->rows(); ++i) {
                  size_t k = static_cast<size_t>(re->integer(i, 0)) - 1;
                  if (k >= out->size()) continue;
                  (*out)[k].events.push_back(
                      {momentAt(*re, i, 1).value_or(AlertTime{}), std::string(re->text(i, 2)),
                       std::string(re->text(i, 3)), std::string(re->text(i, 4)),
                       std::string(re->text(i, 5)), std::string(re->text(i, 6))});
                }
                done(std::move(*out));
              });
        });
  });
}

void acknowledgeAlert(PgPool& pool, int64_t alertId, std::string by,
                      AuditStatement<monitor::AlertState> audit,
                      std::function<void(Result<monitor::AlertState>)> done) {
  // Acknowledged: no more reminders for this firing.
  operatorChange(
      pool, alertId, "acknowledged_at = now(), acknowledged_by = $2, remind_at = NULL", {by},
      "acknowledged", "acknowledged by " + by, [](const std::string&) { return std::nullopt; },
      std::move(audit), std::move(done));
}

void silenceAlert(PgPool& pool, int64_t alertId, AlertTime until, std::string by,
                  AuditStatement<monitor::AlertState> audit,
                  std::function<void(Result<monitor::AlertState>)> done) {
  std::string reason = "silenced by " + by;
  operatorChange(
      pool, alertId, "silenced_until = " + momentSql("$2") + ", silenced_by = $3",
      {momentParam(until), by}, "silenced", reason,
      [reason](const std::string& id) -> std::optional<SqlStatement> {
        return cancelStatement(id, reason);
      },
      std::move(audit), std::move(done));
}

void purgeAlerts(PgPool& pool, std::chrono::seconds keep,
                 std::function<void(Result<int64_t>)> done) {
  std::string keepParam = std::to_string(keep.count());
  pool.acquire([keepParam, done](Result<PgPool::LeasePtr> lease) {
    if (!lease) return done(lease.error());
    auto l = *lease;
    // The outbox rows first; a pending row naming an older event keeps its
    // row (event_id is set NULL).
    l->conn().query(
        "DELETE FROM alert_deliveries WHERE sent_at < now() - $1::int8 * interval '1 second' "
        "OR (given_up AND due_at < now() - $1::int8 * interval '1 second')",
        {keepParam}, [l, keepParam, done](Result<PgResult> o) {
          if (!o) return done(o.error());
          int64_t outbox = o->affected();
          l->conn().query(
              "DELETE FROM alert_events WHERE at < now() - $1::int8 * interval '1 second'",
              {keepParam}, [l, outbox, done](Result<PgResult> e) {
                if (!e) return done(e.error());
                done(outbox + static_cast<int64_t>(e->affected()));
              });
        });
  });
}

}  // namespace ductus::store
