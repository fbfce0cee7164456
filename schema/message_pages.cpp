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
    d.paused = o.value("paused", false);
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

namespace {

// The columns the page reads of each message (m), and gives on (p).
constexpr const char* kPageColumns =
    "m.id, m.tier, m.received_at, m.interface_id, m.status, m.message_type, m.control_id, "
    "m.key_value, m.last_error, m.origin_id, m.dedupe_key";

std::string hexBytea(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + bytes.size() * 2);
  for (char c : bytes) {
    out += digits[static_cast<unsigned char>(c) >> 4];
    out += digits[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// The filters of q as SQL over messages m, and their parameters, appended
// to `params`. `cursor`: with before / after (a page), else without (its
// total). Conditions only when asked for: "$n IS NULL OR ..." would keep
// the planner (generic plans, on the store's connections) from the indexes.
std::string browseWhere(const BrowseQuery& q, bool cursor, std::vector<Param>& params) {
  auto param = [&](std::string v) {
    params.push_back(std::move(v));
    return "$" + std::to_string(params.size());
  };
  std::vector<std::string> conds;
  std::string iface;
  if (q.interfaceId) {
    iface = param(std::to_string(*q.interfaceId)) + "::int8";
    conds.push_back("m.interface_id = " + iface);
  }
  std::string before, after;
  if (cursor && q.before) before = param(std::to_string(*q.before)) + "::int8";
  if (cursor && q.after) after = param(std::to_string(*q.after)) + "::int8";
  if (!before.empty()) conds.push_back("m.id < " + before);
  if (!after.empty()) conds.push_back("m.id > " + after);
  if (q.status)
    conds.push_back("m.status = " + param(std::to_string(static_cast<int>(*q.status))) + "::int2");
  // Messages that ended badly are few among many sent: walking the
  // interface's messages to find them read all of them. They are found
  // through their deliveries' partial indexes (deliveries_quarantined,
  // deliveries_retrying for `errors`), then by id.
  auto fromDeliveries = [&](const std::string& status) {
    std::string s = "SELECT d.message_id FROM deliveries d WHERE " + status;
    if (!iface.empty())
      s += " AND d.destination_id = ANY (ARRAY(SELECT dst.id FROM destinations dst "
           "WHERE dst.interface_id = " +
           iface + "))";
    if (!before.empty()) s += " AND d.message_id < " + before;
    if (!after.empty()) s += " AND d.message_id > " + after;
    return s;
  };
  const std::string quarantined =
      "d.status = " + std::to_string(static_cast<int>(MessageStatus::Quarantined));
  if (q.status == MessageStatus::Quarantined)
    conds.push_back("m.id = ANY (ARRAY(" + fromDeliveries(quarantined) + "))");
  if (q.errors)
    conds.push_back("m.id = ANY (ARRAY(" + fromDeliveries(quarantined) + " UNION " +
                    fromDeliveries("d.status = 0 AND d.attempts > 0") + "))");
  if (q.from) conds.push_back("m.received_at >= " + param(*q.from) + "::timestamptz");
  if (q.to) conds.push_back("m.received_at < " + param(*q.to) + "::timestamptz");
  if (q.type) {
    std::string p = param(*q.type);
    conds.push_back("(m.message_type = " + p + "::text OR starts_with(m.message_type, " + p +
                    "::text || '^'))");
  }
  if (q.controlId) conds.push_back("m.control_id = " + param(*q.controlId) + "::text");
  if (q.key) conds.push_back("m.key_value = " + param(*q.key) + "::text");
  std::string where;
  for (auto& c : conds) where += (where.empty() ? "" : " AND ") + c;
  return where.empty() ? "true" : where;
}

// What the page shows of each message p beyond its columns: its
// interface, deliveries, and marks. The first two marks are looked up
// only where they can apply (a CASE is evaluated lazily):
// - duplicateOf: a duplicate's dedupe key's claim (its primary key),
//   older than p;
// - editedFrom: a copy's origin_id when the origin is p's interface's
//   message (messages_browse), older than p (partitions pruned by time);
// - editedTo: the copies naming p, in its interface: a probe of
//   messages_origin (migration 0015; partial, so small) in each partition
//   from p's time on.
std::string shownOf(const std::string& p, const std::string& deliveryFields) {
  return "(SELECT i.name FROM interfaces i WHERE i.id = " + p + ".interface_id), " +
         deliveriesJson(p, deliveryFields) + ", CASE WHEN " + p +
         ".status = 4 THEN (SELECT k.message_id FROM dedupe_keys k WHERE k.interface_id = " + p +
         ".interface_id AND k.key = " + p + ".dedupe_key AND k.message_id < " + p +
         ".id) END, CASE WHEN " + p +
         ".origin_id IS NOT NULL AND EXISTS (SELECT 1 FROM messages o WHERE o.interface_id = " + p +
         ".interface_id AND o.id = " + p + ".origin_id AND o.received_at <= " + p +
         ".received_at) THEN " + p +
         ".origin_id END, (SELECT json_agg(c.id ORDER BY c.id) FROM messages c WHERE c.origin_id "
         "= " +
         p + ".id AND c.interface_id = " + p + ".interface_id AND c.id > " + p +
         ".id AND c.received_at >= " + p + ".received_at)";
}

// The deliveries' fields a page adds to destination, status and attempts:
// the last error (cut: a receiver's whole answer can be long; the message
// shows it whole) and whether it waits on a paused destination.
std::string pageDeliveryFields(int errorChars) {
  return ", 'lastError', left(d.last_error, " + std::to_string(errorChars) +
         "), 'paused', d.status = 0 AND EXISTS (SELECT 1 FROM destination_pauses dp WHERE "
         "dp.destination_id = d.destination_id)";
}

std::vector<int64_t> idList(const PgResult& r, int row, int col) {
  std::vector<int64_t> out;
  if (r.isNull(row, col)) return out;
  auto j = json::parse(r.text(row, col), nullptr, false);
  if (!j.is_array()) return out;
  for (auto& v : j)
    if (v.is_number_integer()) out.push_back(v.get<int64_t>());
  return out;
}

// A row of browseSelect: id, received_at, status, type, control id, key,
// last_error, origin_id (0-7), then shownOf's interface, deliveries,
// duplicateOf, editedFrom, editedTo (8-12), then hit and n (13-14).
MessageRow pageRow(const PgResult& r, int i) {
  MessageRow m;
  m.id = r.integer(i, 0);
  m.receivedAt = std::string(r.text(i, 1));
  m.status = statusFromColumn(r.integer(i, 2));
  m.type = r.optText(i, 3);
  m.controlId = r.optText(i, 4);
  m.key = r.optText(i, 5);
  m.lastError = r.optText(i, 6);
  m.originId = optInteger(r, i, 7);
  m.interface = std::string(r.text(i, 8));
  m.deliveries = deliveryRows(r, i, 9);
  m.duplicateOf = optInteger(r, i, 10);
  m.editedFrom = optInteger(r, i, 11);
  m.editedTo = idList(r, i, 12);
  return m;
}

}  // namespace

SqlStatement browseSelect(const BrowseQuery& q) {
  bool content = !q.contains.empty();
  // $1: the rows the page CTE gives at most.
  std::vector<Param> params{std::to_string(q.limit + 1)};
  std::string where = browseWhere(q, true, params);
  std::string dir = q.order == BrowseOrder::OldestFirst ? "ASC" : "DESC";
  std::string page;
  if (!content) {
    page = std::string("SELECT ") + kPageColumns +
           ", true AS hit, 0::int8 AS n FROM messages m WHERE " + where + " ORDER BY m.id " + dir +
           " LIMIT $1::int8";
  } else {
    // The window's messages in the order asked, at most scanRows of them,
    // each payload tested for the text; the rows kept are the matches and
    // the last message read (`last`: where a page cut by scanRows goes
    // on, and how many it read). Every step streams (the window functions
    // need one row ahead), so a page that fills stops reading there.
    std::string hit;
    for (auto& bytes : q.contains) {
      params.push_back(hexBytea(bytes));
      hit += (hit.empty() ? "" : " OR ") + std::string("position($") +
             std::to_string(params.size()) + "::bytea IN m.payload) > 0";
    }
    params.push_back(std::to_string(q.scanRows));
    std::string scan = "$" + std::to_string(params.size()) + "::int8";
    page =
        "SELECT x.* FROM (SELECT s.*, row_number() OVER w AS n, lead(s.id) OVER w IS NULL AS "
        "last FROM (SELECT " +
        std::string(kPageColumns) + ", (" + hit + ") AS hit FROM messages m WHERE " + where +
        " ORDER BY m.id " + dir + " LIMIT " + scan + ") s WINDOW w AS (ORDER BY s.id " + dir +
        ")) x WHERE x.hit OR x.last ORDER BY x.id " + dir + " LIMIT $1::int8";
  }
  std::string sql = "WITH page AS MATERIALIZED (" + page + ") SELECT p.id, " +
                    isoTime("p.received_at") +
                    ", p.status, p.message_type, p.control_id, p.key_value, p.last_error, "
                    "p.origin_id, " +
                    shownOf("p", pageDeliveryFields(kListErrorChars)) +
                    ", p.hit, p.n FROM page p ORDER BY p.id " + dir;
  return {sql, params};
}

SqlStatement browseCount(const BrowseQuery& q) {
  // In id order, as the page reads: the planner then walks the page's
  // index and stops at the cap. Unordered, it chose a scan of the
  // partition (fine while the interface is most of it, not when it is a
  // small part) or a bitmap of every match (a key shared by a million
  // messages read them all to count a thousand).
  std::vector<Param> params{std::to_string(kTotalCountCap + 1)};
  std::string where = browseWhere(q, false, params);
  return {"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE " + where +
              " ORDER BY m.id DESC LIMIT $1::int8) c",
          params};
}

namespace {

// The page, then (unless a content search) its total, on one connection.
void runPage(LeasePtr l, BrowseQuery q, std::function<void(Result<MessagePage>)> cb) {
  auto s = browseSelect(q);
  l->conn().query(s.sql, s.params, [l, q, cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    MessagePage page;
    if (q.contains.empty()) {
      int n = std::min<int>(r->rows(), static_cast<int>(q.limit));
      for (int i = 0; i < n; ++i) page.rows.push_back(pageRow(*r, i));
      if (r->rows() > q.limit) page.next = r->integer(n - 1, 0);
    } else {
      // Matches (hit), and the last message read when it is not one.
      int hits = 0;
      for (int i = 0; i < r->rows(); ++i) {
        if (r->text(i, 13) != "t") continue;
        if (++hits > q.limit) break;
        page.rows.push_back(pageRow(*r, i));
      }
      if (r->rows() > 0) page.scanned = r->integer(r->rows() - 1, 14);
      if (hits > q.limit) {
        page.next = page.rows.back().id;
      } else if (page.scanned >= q.scanRows) {
        // Cut by the scan: go on after the last message read.
        page.complete = false;
        page.next = r->integer(r->rows() - 1, 0);
      }
      return cb(std::move(page));
    }
    if (!q.total) return cb(std::move(page));
    auto c = browseCount(q);
    l->conn().query(c.sql, c.params, [l, page = std::move(page), cb](Result<PgResult> r) mutable {
      if (!r) return cb(r.error());
      int64_t n = r->integer(0, 0);
      page.total = MessageTotal{std::min(n, kTotalCountCap), n <= kTotalCountCap};
      cb(std::move(page));
    });
  });
}

}  // namespace

void messagePage(PgPool& pool, std::string interface, BrowseQuery q,
                 std::function<void(Result<MessagePage>)> cb) {
  pool.acquire([interface = std::move(interface), q, cb](Result<LeasePtr> lease) mutable {
    if (!lease) return cb(lease.error());
    LeasePtr l = *lease;
    l->conn().query("SELECT id FROM interfaces WHERE name = $1", {interface},
                    [l, q, interface, cb](Result<PgResult> r) mutable {
                      if (!r) return cb(r.error());
                      if (r->rows() == 0)
                        return cb(Error{"no interface " + interface, ErrorKind::NotFound});
                      q.interfaceId = r->integer(0, 0);
                      runPage(l, std::move(q), cb);
                    });
  });
}

void messageSearch(PgPool& pool, BrowseQuery q, std::function<void(Result<MessagePage>)> cb) {
  q.interfaceId.reset();
  pool.acquire([q = std::move(q), cb](Result<LeasePtr> lease) mutable {
    if (!lease) return cb(lease.error());
    runPage(*lease, std::move(q), cb);
  });
}

// ---- an export ------------------------------------------------------------

void exportScope(PgPool& pool, std::string interface, BrowseQuery q, int64_t cap,
                 std::function<void(Result<ExportScope>)> cb) {
  pool.acquire([interface = std::move(interface), q, cap, cb](Result<LeasePtr> lease) mutable {
    if (!lease) return cb(lease.error());
    LeasePtr l = *lease;
    l->conn().query("SELECT id FROM interfaces WHERE name = $1", {interface},
                    [l, q, cap, interface, cb](Result<PgResult> r) mutable {
                      if (!r) return cb(r.error());
                      if (r->rows() == 0)
                        return cb(Error{"no interface " + interface, ErrorKind::NotFound});
                      ExportScope scope;
                      scope.interfaceId = r->integer(0, 0);
                      q.interfaceId = scope.interfaceId;
                      // In id order through the page's index, as browseCount, to the cap.
                      std::vector<Param> params{std::to_string(cap + 1)};
                      std::string where = browseWhere(q, false, params);
                      std::string sql =
                          "SELECT count(*), max(c.id) FROM (SELECT m.id FROM messages m WHERE " +
                          where + " ORDER BY m.id DESC LIMIT $1::int8) c";
                      l->conn().query(sql, params, [l, scope, cap, cb](Result<PgResult> r) mutable {
                        if (!r) return cb(r.error());
                        int64_t n = r->integer(0, 0);
                        scope.count = std::min(n, cap);
                        scope.more = n > cap;
                        scope.newest = optInteger(*r, 0, 1);
                        cb(scope);
                      });
                    });
  });
}

void messagePayloads(PgPool& pool, std::vector<int64_t> ids,
                     std::function<void(Result<std::map<int64_t, StoredPayload>>)> cb) {
  std::string list = "{";
  for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  list += "}";
  pool.acquire([list, cb](Result<LeasePtr> lease) {
    if (!lease) return cb(lease.error());
    LeasePtr l = *lease;
    // Text and bytea only: the binary results need no decoding but the bytes'.
    l->conn().execute(
        "ductus_api_export_payloads",
        "SELECT m.id::text, m.payload, m.charset FROM messages m WHERE m.id = ANY ($1::int8[])",
        {list}, {},
        [l, cb](Result<PgResult> r) {
          if (!r) return cb(r.error());
          std::map<int64_t, StoredPayload> out;
          for (int i = 0; i < r->rows(); ++i)
            out[std::stoll(std::string(r->text(i, 0)))] =
                StoredPayload{std::string(r->text(i, 1)), r->optText(i, 2)};
          cb(std::move(out));
        },
        /*binaryResults=*/true);
  });
}

// ---- one message ------------------------------------------------------------

void messageDetail(PgPool& pool, int64_t id, std::function<void(Result<MessageDetail>)> cb) {
  // Columns 0-7 and 8-12 as a page's (pageRow), then the detail's own.
  std::string sql =
      "SELECT m.id, " + isoTime("m.received_at") +
      ", m.status, m.message_type, m.control_id, m.key_value, m.last_error, m.origin_id, " +
      shownOf("m",
              ", 'lastError', d.last_error, 'paused', d.status = 0 AND EXISTS (SELECT 1 "
              "FROM destination_pauses dp WHERE dp.destination_id = d.destination_id), "
              "'updatedAt', " +
                  isoTime("d.updated_at") + ", 'outputSaved', d.output IS NOT NULL") +
      ", m.dedupe_key, m.partition_key, m.tier, octet_length(m.payload), m.charset "
      "FROM messages m WHERE m.id = $1::int8";
  query(pool, {sql, {std::to_string(id)}}, [id, cb](Result<PgResult> r) {
    if (!r) return cb(r.error());
    if (r->rows() == 0) return cb(noMessage(id));
    auto& x = *r;
    MessageDetail m;
    m.row = pageRow(x, 0);
    m.interface = m.row.interface;
    m.dedupeKey = x.optText(0, 13);
    m.lane = x.integer(0, 14);
    m.tier = x.integer(0, 15);
    m.bytes = x.integer(0, 16);
    m.charset = x.optText(0, 17);
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
