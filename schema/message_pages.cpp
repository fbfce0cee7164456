#include "schema/message_pages.h"

#include <nlohmann/json.hpp>

namespace ductus::store {
namespace {

using json = nlohmann::json;
using LeasePtr = PgPool::LeasePtr;

std::string isoTime(const std::string& column) {
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

std::optional<int64_t> optInteger(const PgResult& r, int row, int col) {
  if (r.isNull(row, col)) return std::nullopt;
  return r.integer(row, col);
}

// The deliveries of the message row `m` as JSON text, by destination name.
std::string deliveriesJson(const std::string& m, const std::string& fields) {
  return "(SELECT json_agg(json_build_object('destination', dst.name, 'status', d.status, "
         "'attempts', d.attempts" +
         fields +
         ") ORDER BY dst.name) FROM deliveries d JOIN destinations dst ON dst.id = "
         "d.destination_id WHERE d.message_id = " +
         m + ".id AND d.tier = " + m + ".tier AND d.received_at = " + m + ".received_at)";
}

// deliveriesJson's text as rows (NULL, for a message without deliveries,
// and anything unreadable: none).
std::vector<DeliveryRow> deliveryRows(const PgResult& r, int row, int col) {
  std::vector<DeliveryRow> out;
  if (r.isNull(row, col)) return out;
  auto j = json::parse(r.text(row, col), nullptr, false);
  if (!j.is_array()) return out;
  auto text = [](const json& o, const char* k) -> std::optional<std::string> {
    auto it = o.find(k);
    if (it == o.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  for (auto& o : j) {
    if (!o.is_object()) continue;
    DeliveryRow d;
    d.destination = text(o, "destination").value_or("");
    d.status = statusFromColumn(o.value("status", int64_t{0}));
    d.attempts = o.value("attempts", int64_t{0});
    d.lastError = text(o, "lastError");
    d.updatedAt = text(o, "updatedAt");
    d.outputSaved = o.value("outputSaved", false);
    out.push_back(std::move(d));
  }
  return out;
}

// One statement on a connection of the pool; cb hears the connect error too.
void query(PgPool& pool, SqlStatement s, std::function<void(Result<PgResult>)> cb) {
  pool.acquire([s = std::move(s), cb = std::move(cb)](Result<LeasePtr> l) mutable {
    if (!l) return cb(l.error());
    LeasePtr lease = *l;
    lease->conn().query(std::move(s.sql), std::move(s.params),
                        [lease, cb](Result<PgResult> r) { cb(std::move(r)); });
  });
}

Error noMessage(int64_t id) { return Error{"no message " + std::to_string(id), ErrorKind::NotFound}; }

}  // namespace

// ---- the quarantine list --------------------------------------------------

SqlStatement quarantineSelect(std::optional<int64_t> before, int64_t limit,
                              const std::optional<std::string>& interface) {
  // A page is `limit` messages (all their quarantined deliveries), so the
  // next page, before the last message's id, never cuts a message in two.
  // Conditions are added only when asked for: an "IS NULL OR" would keep
  // the planner from the partial index. The interface's destinations are
  // an ARRAY (computed once), so their filter is checked in the index.
  std::vector<Param> params{std::to_string(limit)};
  std::string where =
      "d.status = " + std::to_string(static_cast<int>(MessageStatus::Quarantined));
  if (before) {
    params.push_back(std::to_string(*before));
    where += " AND d.message_id < $" + std::to_string(params.size()) + "::int8";
  }
  if (interface) {
    params.push_back(*interface);
    where +=
        " AND d.destination_id = ANY (ARRAY(SELECT dst.id FROM destinations dst "
        "JOIN interfaces i ON i.id = dst.interface_id WHERE i.name = $" +
        std::to_string(params.size()) + "))";
  }
  std::string sql =
      "WITH page AS MATERIALIZED (SELECT DISTINCT d.message_id FROM deliveries d WHERE " + where +
      " ORDER BY d.message_id DESC LIMIT $1::int8) "
      "SELECT d.message_id, i.name, dst.name, " +
      isoTime("d.received_at") + ", d.attempts, d.last_error, " + isoTime("d.updated_at") +
      " FROM page p JOIN deliveries d ON d.message_id = p.message_id AND " + where +
      " JOIN destinations dst ON dst.id = d.destination_id "
      "JOIN interfaces i ON i.id = dst.interface_id "
      "ORDER BY d.message_id DESC, i.name, dst.name";
  return {sql, params};
}

void quarantinePage(PgPool& pool, std::optional<int64_t> before, int64_t limit,
                    std::optional<std::string> interface,
                    std::function<void(Result<std::vector<QuarantinedDelivery>>)> cb) {
  query(pool, quarantineSelect(before, limit, interface), [cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    std::vector<QuarantinedDelivery> rows;
    for (int i = 0; i < r->rows(); ++i)
      rows.push_back({r->integer(i, 0), std::string(r->text(i, 1)), std::string(r->text(i, 2)),
                      std::string(r->text(i, 3)), r->integer(i, 4), r->optText(i, 5),
                      r->optText(i, 6)});
    cb(std::move(rows));
  });
}

// ---- the message browser --------------------------------------------------

SqlStatement browseSelect(const BrowseQuery& q) {
  // Conditions only when asked for: "$n IS NULL OR ..." would keep the
  // planner (generic plans, on the store's connections) from the indexes.
  std::vector<Param> params{std::to_string(q.interfaceId), std::to_string(q.limit + 1)};
  auto param = [&](std::string v) {
    params.push_back(std::move(v));
    return "$" + std::to_string(params.size());
  };
  std::string where = "m.interface_id = $1::int8";
  if (q.before) where += " AND m.id < " + param(std::to_string(*q.before)) + "::int8";
  if (q.status)
    where += " AND m.status = " + param(std::to_string(static_cast<int>(*q.status))) + "::int2";
  // Quarantined messages are few among many sent: walking the interface's
  // messages to find them read all of them. They are found through their
  // deliveries' partial index (deliveries_quarantined), then by id.
  if (q.status == MessageStatus::Quarantined)
    where +=
        " AND m.id = ANY (ARRAY(SELECT d.message_id FROM deliveries d WHERE d.status = " +
        std::to_string(static_cast<int>(MessageStatus::Quarantined)) +
        " AND d.destination_id = ANY (ARRAY(SELECT dst.id FROM destinations dst "
        "WHERE dst.interface_id = $1::int8))" +
        (q.before ? " AND d.message_id < $3::int8" : std::string()) + "))";
  if (q.from) where += " AND m.received_at >= " + param(*q.from) + "::timestamptz";
  if (q.to) where += " AND m.received_at < " + param(*q.to) + "::timestamptz";
  if (q.type) {
    std::string p = param(*q.type);
    where += " AND (m.message_type = " + p + "::text OR starts_with(m.message_type, " + p +
             "::text || '^'))";
  }
  if (q.controlId) where += " AND m.control_id = " + param(*q.controlId) + "::text";
  if (q.key) where += " AND m.key_value = " + param(*q.key) + "::text";
  std::string sql =
      "WITH page AS MATERIALIZED (SELECT m.id, m.tier, m.received_at, m.status, "
      "m.message_type, m.control_id, m.key_value, m.last_error, m.origin_id FROM messages m "
      "WHERE " +
      where +
      " ORDER BY m.id DESC LIMIT $2::int8) "
      "SELECT p.id, " +
      isoTime("p.received_at") +
      ", p.status, p.message_type, p.control_id, p.key_value, p.last_error, p.origin_id, " +
      deliveriesJson("p", "") + " FROM page p ORDER BY p.id DESC";
  return {sql, params};
}

void messagePage(PgPool& pool, std::string interface, BrowseQuery q,
                 std::function<void(Result<MessagePage>)> cb) {
  pool.acquire([interface = std::move(interface), q, cb](Result<LeasePtr> lease) mutable {
    if (!lease) return cb(lease.error());
    LeasePtr l = *lease;
    l->conn().query(
        "SELECT id FROM interfaces WHERE name = $1", {interface},
        [l, q, interface, cb](Result<PgResult> r) mutable {
          if (!r) return cb(r.error());
          if (r->rows() == 0) return cb(Error{"no interface " + interface, ErrorKind::NotFound});
          q.interfaceId = r->integer(0, 0);
          auto s = browseSelect(q);
          l->conn().query(s.sql, s.params, [l, q, cb](Result<PgResult> r) {
            if (!r) return cb(r.error());
            MessagePage page;
            int n = std::min<int>(r->rows(), static_cast<int>(q.limit));
            for (int i = 0; i < n; ++i)
              page.rows.push_back({r->integer(i, 0), std::string(r->text(i, 1)),
                                   statusFromColumn(r->integer(i, 2)), r->optText(i, 3),
                                   r->optText(i, 4), r->optText(i, 5), r->optText(i, 6),
                                   optInteger(*r, i, 7), deliveryRows(*r, i, 8)});
            if (r->rows() > q.limit) page.next = r->integer(n - 1, 0);
            cb(std::move(page));
          });
        });
  });
}

// ---- one message ------------------------------------------------------------

void messageDetail(PgPool& pool, int64_t id, std::function<void(Result<MessageDetail>)> cb) {
  std::string sql =
      "SELECT m.id, i.name, " + isoTime("m.received_at") +
      ", m.status, m.message_type, m.control_id, m.key_value, m.dedupe_key, m.last_error, "
      "m.origin_id, m.partition_key, m.tier, octet_length(m.payload), m.charset, " +
      deliveriesJson("m", ", 'lastError', d.last_error, 'updatedAt', " + isoTime("d.updated_at") +
                              ", 'outputSaved', d.output IS NOT NULL") +
      " FROM messages m JOIN interfaces i ON i.id = m.interface_id WHERE m.id = $1::int8";
  query(pool, {sql, {std::to_string(id)}}, [id, cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    if (r->rows() == 0) return cb(noMessage(id));
    auto& x = *r;
    MessageDetail m;
    m.row = {x.integer(0, 0),  std::string(x.text(0, 2)), statusFromColumn(x.integer(0, 3)),
             x.optText(0, 4), x.optText(0, 5),          x.optText(0, 6),
             x.optText(0, 8), optInteger(x, 0, 9),       deliveryRows(x, 0, 14)};
    m.interface = std::string(x.text(0, 1));
    m.dedupeKey = x.optText(0, 7);
    m.lane = x.integer(0, 10);
    m.tier = x.integer(0, 11);
    m.bytes = x.integer(0, 12);
    m.charset = x.optText(0, 13);
    cb(std::move(m));
  });
}

namespace {

// Rows: the message (destination NULL) first, then each saved output; bytea
// and text only, so the binary results need no decoding but the bytes'.
constexpr const char* kPayloadSelect = R"(
SELECT NULL::text AS destination, m.payload, m.charset, i.name
FROM messages m JOIN interfaces i ON i.id = m.interface_id
WHERE m.id = $1::int8
UNION ALL
SELECT dst.name, d.output, NULL, NULL
FROM messages m JOIN deliveries d
  ON d.message_id = m.id AND d.tier = m.tier AND d.received_at = m.received_at
JOIN destinations dst ON dst.id = d.destination_id
WHERE m.id = $1::int8 AND d.output IS NOT NULL
)";

}  // namespace

void messagePayload(PgPool& pool, int64_t id, std::function<void(Result<MessagePayload>)> cb) {
  pool.acquire([id, cb](Result<LeasePtr> lease) {
    if (!lease) return cb(lease.error());
    LeasePtr l = *lease;
    l->conn().execute(
        "ductus_api_message_payload", kPayloadSelect, {std::to_string(id)}, {},
        [l, id, cb](Result<PgResult> r) {
          if (!r) return cb(r.error());
          int self = -1;
          for (int i = 0; i < r->rows() && self < 0; ++i)
            if (r->isNull(i, 0)) self = i;
          if (self < 0) return cb(noMessage(id));
          MessagePayload p;
          p.interface = std::string(r->text(self, 3));
          p.payload = std::string(r->text(self, 1));
          p.charset = r->optText(self, 2);
          for (int i = 0; i < r->rows(); ++i) {
            if (i == self) continue;
            p.outputs.push_back({std::string(r->text(i, 0)), std::string(r->text(i, 1))});
          }
          cb(std::move(p));
        },
        /*binaryResults=*/true);
  });
}

void editSource(PgPool& pool, int64_t id, std::function<void(Result<EditSource>)> cb) {
  query(pool,
        {"SELECT i.name, m.charset FROM messages m JOIN interfaces i ON i.id = m.interface_id "
         "WHERE m.id = $1::int8",
         {std::to_string(id)}},
        [id, cb](Result<PgResult> r) {
          if (!r) return cb(r.error());
          if (r->rows() == 0) return cb(noMessage(id));
          cb(EditSource{std::string(r->text(0, 0)), r->optText(0, 1)});
        });
}

}  // namespace ductus::store
