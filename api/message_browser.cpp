#include "api/message_browser.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <memory>
#include <regex>

#include "api/audit/audit_log.h"
#include "api/auth/handler_support.h"
#include "api/message_routes.h"
#include "common/hl7/mllp.h"
#include "common/text.h"
#include "schema/pg_error.h"
#include "schema/store_types.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using store::PgResult;
using LeasePtr = store::PgPool::LeasePtr;
using Results = std::vector<PgResult>;

using Deps = MessageDeps;

constexpr size_t kMaxReasonBytes = 1000;
constexpr const char* kLatin1 = "iso-8859-1";
constexpr const char* kUtf8 = "utf-8";

const char* const kStatusNames[] = {"pending", "sent", "filtered", "quarantined", "duplicate"};

std::string statusName(long long s) { return kStatusNames[s >= 0 && s <= 4 ? s : 4]; }

std::optional<int> statusOf(std::string_view name) {
  for (int i = 0; i <= 4; ++i)
    if (name == kStatusNames[i]) return i;
  return std::nullopt;
}

std::string isoTime(const std::string& column) {
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

// The deliveries of the message row `m` as JSON text, by destination name.
std::string deliveriesJson(const std::string& m, const std::string& fields) {
  return "(SELECT json_agg(json_build_object('destination', dst.name, 'status', "
         "(ARRAY['pending','sent','filtered','quarantined'])[d.status + 1], 'attempts', "
         "d.attempts" +
         fields +
         ") ORDER BY dst.name) FROM deliveries d JOIN destinations dst ON dst.id = "
         "d.destination_id WHERE d.message_id = " +
         m + ".id AND d.tier = " + m + ".tier AND d.received_at = " + m + ".received_at)";
}

std::optional<int64_t> positiveId(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

std::optional<json> jsonText(const PgResult& r, int row, int col) {
  if (r.isNull(row, col)) return std::nullopt;
  auto j = json::parse(r.text(row, col), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

json nullable(const PgResult& r, int row, int col) {
  return r.isNull(row, col) ? json() : json(std::string(r.text(row, col)));
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// A payload or output as the JSON the API gives back: the text the
// interface's code read (intake recorded the charset when the interface or
// MSH-18 named ISO-8859-1; otherwise UTF-8 where the bytes are UTF-8 and
// ISO-8859-1 where they are not, as the SDK reads them), or base64 where
// no text would be faithful: a NUL byte (no text format has one) or a
// charset this version does not know (written by a newer one).
json decoded(std::string_view bytes, const std::optional<std::string>& charset,
             const char* field) {
  bool known = !charset || *charset == kLatin1 || *charset == kUtf8;
  if (!known || bytes.find('\0') != std::string_view::npos)
    return {{"encoding", "base64"}, {"charset", charset ? json(*charset) : json()},
            {field, base64(bytes)}};
  if ((charset && *charset == kLatin1) || !isUtf8(bytes))
    return {{"encoding", "text"}, {"charset", kLatin1}, {field, latin1AsUtf8(bytes)}};
  return {{"encoding", "text"}, {"charset", kUtf8}, {field, std::string(bytes)}};
}

// UTF-8 text as ISO-8859-1 bytes; nullopt when a character has no byte.
std::optional<std::string> utf8AsLatin1(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < s.size()) {
      auto c2 = static_cast<unsigned char>(s[++i]);
      out.push_back(static_cast<char>(((c & 0x03) << 6) | (c2 & 0x3F)));
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// A deadlock with a delivery flush (it updates a delivery, then its
// message; this the message first, as settle needs) ends one of the two:
// ours is tried again from BEGIN rather than answered 503.
void runRetried(LeasePtr l, std::vector<TxStep> steps, TxDone done, int tries = 3) {
  runTransaction(l->conn(), steps, [l, steps, done, tries](Result<Results> r) mutable {
    if (!r && tries > 1 && store::pg::retryable(r.error()))
      return runRetried(l, std::move(steps), std::move(done), tries - 1);
    done(std::move(r));
  });
}

}  // namespace

SqlStatement browseSelect(const BrowseQuery& q) {
  // Conditions only when asked for: "$n IS NULL OR ..." would keep the
  // planner (generic plans, on the store's connections) from the indexes.
  std::vector<store::Param> params{std::to_string(q.interfaceId), std::to_string(q.limit + 1)};
  auto param = [&](std::string v) {
    params.push_back(std::move(v));
    return "$" + std::to_string(params.size());
  };
  std::string where = "m.interface_id = $1::int8";
  if (q.before) where += " AND m.id < " + param(std::to_string(*q.before)) + "::int8";
  if (q.status) where += " AND m.status = " + param(std::to_string(*q.status)) + "::int2";
  // Quarantined messages are few among many sent: walking the interface's
  // messages to find them read all of them. They are found through their
  // deliveries' partial index (deliveries_quarantined), then by id.
  if (q.status == static_cast<int>(store::MessageStatus::Quarantined))
    where +=
        " AND m.id = ANY (ARRAY(SELECT d.message_id FROM deliveries d WHERE d.status = 3 "
        "AND d.destination_id = ANY (ARRAY(SELECT dst.id FROM destinations dst "
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

namespace {

// ---- GET /api/v1/interfaces/{name}/messages ------------------------------

// The query's filters, or the 400 naming the one that is wrong.
Result<BrowseQuery> browseQuery(const ApiRequest& req) {
  BrowseQuery q;
  auto before = positiveQuery(req, "before");
  if (!before) return before.error();
  q.before = *before;
  auto limit = positiveQuery(req, "limit");
  if (!limit) return limit.error();
  q.limit = limit->value_or(kBrowseLimitDefault);
  if (q.limit < 1 || q.limit > kBrowseLimitMax)
    return Error{"`limit` must be 1 to " + std::to_string(kBrowseLimitMax), ErrorKind::Invalid};
  auto text = [&](const char* name) -> std::optional<std::string> {
    auto it = req.query.find(name);
    if (it == req.query.end()) return std::nullopt;
    return it->second;
  };
  if (auto s = text("status")) {
    q.status = statusOf(*s);
    if (!q.status)
      return Error{"`status` must be pending, sent, filtered, quarantined or duplicate",
                   ErrorKind::Invalid};
  }
  for (auto [name, field] : {std::pair{"from", &q.from}, std::pair{"to", &q.to}}) {
    auto t = timeQuery(req, name);
    if (!t) return t.error();
    if (*t) *field = **t;
  }
  for (auto [name, field] : {std::pair{"type", &q.type}, std::pair{"control_id", &q.controlId},
                             std::pair{"key", &q.key}})
    if (auto t = text(name)) {
      if (t->empty())
        return Error{"`" + std::string(name) + "` must not be empty", ErrorKind::Invalid};
      // Spelled as intake stores it, so a long key finds its hash.
      *field = store::searchableText(*t);
    }
  return q;
}

void listMessages(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto q = browseQuery(req);
  if (!q) return respond(errorResponse(q.error()));
  std::string name = req.params.at("name");
  withConnection(d.pool, respond, [q = *q, name, respond](LeasePtr l) mutable {
    l->conn().query(
        "SELECT id FROM interfaces WHERE name = $1", {name},
        [l, q, name, respond](Result<PgResult> r) mutable {
          if (!r) return respond(errorResponse(r.error()));
          if (r->rows() == 0) return respond(jsonError(404, "not_found", "no interface " + name));
          q.interfaceId = r->integer(0, 0);
          auto s = browseSelect(q);
          l->conn().query(s.sql, s.params, [l, q, respond](Result<PgResult> r) {
            if (!r) return respond(errorResponse(r.error()));
            json items = json::array();
            int n = std::min<int>(r->rows(), static_cast<int>(q.limit));
            for (int i = 0; i < n; ++i)
              items.push_back({{"id", r->integer(i, 0)},
                               {"receivedAt", std::string(r->text(i, 1))},
                               {"status", statusName(r->integer(i, 2))},
                               {"type", nullable(*r, i, 3)},
                               {"controlId", nullable(*r, i, 4)},
                               {"key", nullable(*r, i, 5)},
                               {"lastError", nullable(*r, i, 6)},
                               {"originId", r->isNull(i, 7) ? json() : json(r->integer(i, 7))},
                               {"deliveries", jsonText(*r, i, 8).value_or(json::array())}});
            json next = r->rows() > q.limit ? json(r->integer(n - 1, 0)) : json();
            respond(jsonOk(200, {{"items", items}, {"next", next}}));
          });
        });
  });
}

// ---- GET /api/v1/messages/{id} ---------------------------------------------

void getMessage(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  std::string sql =
      "SELECT m.id, i.name, " + isoTime("m.received_at") +
      ", m.status, m.message_type, m.control_id, m.key_value, m.dedupe_key, m.last_error, "
      "m.origin_id, m.partition_key, m.tier, octet_length(m.payload), m.charset, " +
      deliveriesJson("m", ", 'lastError', d.last_error, 'updatedAt', " + isoTime("d.updated_at") +
                              ", 'outputSaved', d.output IS NOT NULL") +
      " FROM messages m JOIN interfaces i ON i.id = m.interface_id WHERE m.id = $1::int8";
  withConnection(d.pool, respond, [sql, id = *id, respond](LeasePtr l) {
    l->conn().query(sql, {std::to_string(id)}, [l, id, respond](Result<PgResult> r) {
      if (!r) return respond(errorResponse(r.error()));
      if (r->rows() == 0)
        return respond(jsonError(404, "not_found", "no message " + std::to_string(id)));
      auto& x = *r;
      respond(jsonOk(200, {{"id", x.integer(0, 0)},
                           {"interface", std::string(x.text(0, 1))},
                           {"receivedAt", std::string(x.text(0, 2))},
                           {"status", statusName(x.integer(0, 3))},
                           {"type", nullable(x, 0, 4)},
                           {"controlId", nullable(x, 0, 5)},
                           {"key", nullable(x, 0, 6)},
                           {"dedupeKey", nullable(x, 0, 7)},
                           {"lastError", nullable(x, 0, 8)},
                           {"originId", x.isNull(0, 9) ? json() : json(x.integer(0, 9))},
                           {"lane", x.integer(0, 10)},
                           {"tier", x.integer(0, 11)},
                           {"bytes", x.integer(0, 12)},
                           {"charset", nullable(x, 0, 13)},
                           {"deliveries", jsonText(x, 0, 14).value_or(json::array())}}));
    });
  });
}

// ---- GET /api/v1/messages/{id}/payload -------------------------------------

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

void getPayload(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  auto entry = auditEntryFor(*req.caller, "message.payload");
  entry.targetKind = "message";
  entry.targetId = std::to_string(*id);
  // The row first, committed on a connection of its own: nothing of the
  // payload is read unless the read is on record.
  d.audit.write(entry, [&d, id = *id, respond](Status s) {
    if (!s.ok()) {
      auto r = jsonError(503, "unavailable", s.error().message + " (the payload is not read "
                                                                 "without its audit row)");
      r.headers.emplace_back("Retry-After", "1");
      return respond(r);
    }
    withConnection(d.pool, respond, [id, respond](LeasePtr l) {
      l->conn().execute(
          "ductus_api_message_payload", kPayloadSelect, {std::to_string(id)}, {},
          [l, id, respond](Result<PgResult> r) {
            if (!r) return respond(errorResponse(r.error()));
            int self = -1;
            for (int i = 0; i < r->rows() && self < 0; ++i)
              if (r->isNull(i, 0)) self = i;
            if (self < 0)
              return respond(jsonError(404, "not_found", "no message " + std::to_string(id)));
            auto charset = r->optText(self, 2);
            json body = decoded(r->text(self, 1), charset, "payload");
            body["messageId"] = id;
            body["interface"] = std::string(r->text(self, 3));
            json outputs = json::array();
            for (int i = 0; i < r->rows(); ++i) {
              if (i == self) continue;
              json o = decoded(r->text(i, 1), charset, "output");
              o["destination"] = std::string(r->text(i, 0));
              outputs.push_back(std::move(o));
            }
            body["outputs"] = std::move(outputs);
            respond(jsonOk(200, body));
          },
          /*binaryResults=*/true);
    });
  });
}

// ---- POST /api/v1/messages/{id}/edit ---------------------------------------

struct Edit {
  int64_t original = 0;
  std::string interface;
  std::string payload;  // bytes, in `charset`
  std::string charset;
  std::optional<std::string> reason;
  MessageKeysView keys;
};

// The copy and its deliveries in one statement; a dedupe key is stored on
// it but not claimed: the original holds the claim, and the copy is meant
// to go out whatever the key says.
constexpr const char* kInsertCopy = R"(
WITH m AS (
  INSERT INTO messages (id, tier, interface_id, partition_key, dedupe_key, status, last_error,
                        origin_id, payload, message_type, control_id, key_value, charset)
  SELECT nextval('messages_id_seq'), $2::int2, $1::int8, $3::int4, $4::text,
         CASE WHEN cardinality($5::int8[]) = 0 THEN 2 ELSE 0 END,
         CASE WHEN cardinality($5::int8[]) = 0 THEN 'no destination' END,
         $6::int8, $7::bytea, $8::text, $9::text, $10::text, $11::text
  RETURNING id, tier, received_at, partition_key, status
), dl AS (
  INSERT INTO deliveries (message_id, destination_id, tier, received_at, partition_key)
  SELECT m.id, dest, m.tier, m.received_at, m.partition_key
  FROM m CROSS JOIN unnest($5::int8[]) AS dest
  WHERE m.status = 0
)
SELECT id, status FROM m
)";

// A bytea as a text parameter: hex, since the escape form reads the
// backslashes HL7 escapes are made of.
std::string hexBytea(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + 2 * bytes.size());
  for (char c : bytes) {
    auto b = static_cast<unsigned char>(c);
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

// The first column's values, sorted (an UPDATE's RETURNING has no order).
json names(const PgResult& r) {
  std::vector<std::string> v;
  for (int i = 0; i < r.rows(); ++i) v.emplace_back(r.text(i, 0));
  std::sort(v.begin(), v.end());
  return v;
}

std::string intArray(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "}";
}

void editInTransaction(Deps& d, std::shared_ptr<Edit> e, AuditEntry entry, LeasePtr l,
                       ApiRespond respond) {
  std::string id = std::to_string(e->original);
  std::vector<TxStep> steps;
  // 0: the original locked, as settle and the other actions lock it.
  steps.push_back(fixedStep({"SELECT m.id, m.interface_id FROM messages m WHERE m.id = $1::int8 "
                             "FOR UPDATE OF m",
                             {id}}));
  // 1: its deliveries still pending.
  steps.push_back([id](const Results& r) -> Result<SqlStatement> {
    if (r[0].rows() == 0) return Error{"no message " + id, ErrorKind::NotFound};
    return SqlStatement{
        "SELECT dst.name FROM messages m JOIN deliveries d ON d.message_id = m.id "
        "AND d.tier = m.tier AND d.received_at = m.received_at "
        "JOIN destinations dst ON dst.id = d.destination_id "
        "WHERE m.id = $1::int8 AND d.status = 0 ORDER BY dst.name",
        {id}};
  });
  // 2: the copy.
  steps.push_back([e, id](const Results& r) -> Result<SqlStatement> {
    if (r[1].rows() > 0) {
      std::string names;
      for (int i = 0; i < r[1].rows(); ++i) names += (i ? ", " : "") + std::string(r[1].text(i, 0));
      return Error{"message " + id + " is still pending for " + names +
                       ": let it finish (or dismiss it) before sending a corrected copy",
                   ErrorKind::StillPending};
    }
    const auto& k = e->keys;
    return SqlStatement{kInsertCopy,
                        {std::string(r[0].text(0, 1)), std::to_string(k.tier),
                         std::to_string(k.lane), k.dedupeKey, intArray(k.destinationIds), id,
                         hexBytea(e->payload), k.columns.type, k.columns.controlId, k.columns.keyValue,
                         k.columns.charset}};
  });
  // 3: the original's quarantined deliveries are done with.
  steps.push_back([id](const Results& r) -> Result<SqlStatement> {
    return SqlStatement{
        "UPDATE deliveries d SET status = 2, last_error = $2, updated_at = now() "
        "FROM messages m, destinations dst "
        "WHERE m.id = $1::int8 AND d.message_id = m.id AND d.tier = m.tier "
        "AND d.received_at = m.received_at AND dst.id = d.destination_id AND d.status = 3 "
        "RETURNING dst.name",
        {id, "replaced by edited copy " + std::string(r[2].text(0, 0))}};
  });
  // 4: the original's status follows its deliveries, as settle sets it.
  steps.push_back([id](const Results&) -> Result<SqlStatement> {
    return SqlStatement{
        "UPDATE messages m SET status = (SELECT CASE WHEN bool_or(d.status = 0) THEN 0 "
        "WHEN bool_or(d.status = 3) THEN 3 WHEN bool_or(d.status = 1) THEN 1 ELSE 2 END "
        "FROM deliveries d WHERE d.message_id = m.id AND d.tier = m.tier "
        "AND d.received_at = m.received_at) "
        "WHERE m.id = $1::int8 AND m.status <> 4 AND EXISTS (SELECT 1 FROM deliveries d "
        "WHERE d.message_id = m.id AND d.tier = m.tier AND d.received_at = m.received_at) "
        "RETURNING m.status",
        {id}};
  });
  // 5: the audit row, in the same transaction: no row, no copy.
  steps.push_back([&d, e, entry](const Results& r) -> Result<SqlStatement> {
    auto a = entry;
    a.detail["copyId"] = r[2].integer(0, 0);
    a.detail["replaced"] = names(r[3]);
    a.detail["bytes"] = e->payload.size();
    a.detail["charset"] = e->charset;
    if (e->reason) a.detail["reason"] = *e->reason;
    return d.audit.statement(a);
  });
  runRetried(l, std::move(steps), [&d, l, e, respond](Result<Results> r) {
    if (!r) {
      return respond(errorResponse(r.error()));
    }
    auto& rs = *r;
    // After the commit, so the loops read the copy's rows.
    if (d.engine) d.engine->wake(e->interface);
    respond(jsonOk(201, {{"messageId", rs[2].integer(0, 0)},
                         {"originId", e->original},
                         {"interface", e->interface},
                         {"status", statusName(rs[2].integer(0, 1))},
                         {"replaced", names(rs[3])},
                         {"originalStatus",
                          rs[4].rows() > 0 ? json(statusName(rs[4].integer(0, 0))) : json()}}));
  });
}

void edit(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto e = std::make_shared<Edit>();
  e->original = *id;
  auto text = stringField(*body, "payload");
  if (!text || text->empty())
    return respond(jsonError(400, "invalid",
                             "give {\"payload\": the corrected message as text, \"reason\": why, "
                             "\"charset\": \"utf-8\" | \"iso-8859-1\"}"));
  if (body->contains("reason")) {
    e->reason = stringField(*body, "reason");
    if (!e->reason || e->reason->size() > kMaxReasonBytes)
      return respond(jsonError(400, "invalid", "`reason` must be text of at most " +
                                                   std::to_string(kMaxReasonBytes) + " bytes"));
  }
  std::optional<std::string> charset;
  if (body->contains("charset")) {
    charset = stringField(*body, "charset");
    if (!charset || (*charset != kUtf8 && *charset != kLatin1))
      return respond(jsonError(400, "invalid", "`charset` must be utf-8 or iso-8859-1"));
  }
  const Caller& caller = *req.caller;
  auto entry = auditEntryFor(caller, "message.edit");
  entry.targetKind = "message";
  entry.targetId = std::to_string(*id);
  withConnection(d.pool, respond, [&d, e, text = *text, charset, entry,
                                   respond](LeasePtr l) mutable {
    // The original's interface (whose keys the copy is read with) and the
    // charset it was read in (the copy's, unless the caller names one).
    l->conn().query(
        "SELECT i.name, m.charset FROM messages m JOIN interfaces i ON i.id = m.interface_id "
        "WHERE m.id = $1::int8",
        {std::to_string(e->original)},
        [&d, l, e, text, charset, entry, respond](Result<PgResult> r) mutable {
          if (!r) return respond(errorResponse(r.error()));
          if (r->rows() == 0)
            return respond(
                jsonError(404, "not_found", "no message " + std::to_string(e->original)));
          e->interface = std::string(r->text(0, 0));
          e->charset = charset ? *charset : r->isNull(0, 1) ? kUtf8 : std::string(r->text(0, 1));
          if (e->charset == kLatin1) {
            auto bytes = utf8AsLatin1(text);
            if (!bytes)
              return respond(jsonError(400, "invalid",
                                       "the payload has characters ISO-8859-1 can't write; "
                                       "give \"charset\": \"utf-8\""));
            e->payload = std::move(*bytes);
          } else {
            e->payload = std::move(text);
          }
          // A framing byte would leave an MLLP destination as two messages,
          // the second never stored: refused as intake refuses it.
          if (auto s = hl7::mllp::refuseFramingBytes(e->payload, "the payload"); !s)
            return respond(jsonError(400, "invalid", s.error().message));
          if (!d.engine)
            return respond(
                errorResponse(Error{"no engine behind this API", ErrorKind::NotRunHere}));
          auto keys = d.engine->readKeys(e->interface, e->payload);
          if (!keys) return respond(errorResponse(keys.error()));
          e->keys = std::move(*keys);
          auto a = entry;
          a.targetName = e->interface;
          editInTransaction(d, e, a, l, respond);
        });
  });
}

// ---- schemas -------------------------------------------------------------

constexpr const char* kStatusEnum =
    R"({"enum":["pending","sent","filtered","quarantined","duplicate"]})";

std::string deliverySchema(bool full) {
  std::string s =
      R"({"type":"object","properties":{"destination":{"type":"string"},)"
      R"("status":{"enum":["pending","sent","filtered","quarantined"]},"attempts":{"type":"integer"})";
  if (full)
    s += R"(,"lastError":{"type":["string","null"]},"updatedAt":{"type":["string","null"]},)"
         R"("outputSaved":{"type":"boolean"})";
  return s + "}}";
}

std::string pageSchema() {
  return std::string(R"({"type":"object","properties":{"items":{"type":"array","items":)"
                     R"({"type":"object","properties":{"id":{"type":"integer"},)"
                     R"("receivedAt":{"type":"string"},"status":)") +
         kStatusEnum +
         R"(,"type":{"type":["string","null"]},"controlId":{"type":["string","null"]},)"
         R"("key":{"type":["string","null"]},"lastError":{"type":["string","null"]},)"
         R"("originId":{"type":["integer","null"]},"deliveries":{"type":"array","items":)" +
         deliverySchema(false) +
         R"(}}}},"next":{"type":["integer","null"],"description":"pass as `before` for the next page"}}})";
}

std::string messageSchema() {
  return std::string(
             R"({"type":"object","properties":{"id":{"type":"integer"},"interface":{"type":"string"},)"
             R"("receivedAt":{"type":"string"},"status":)") +
         kStatusEnum +
         R"(,"type":{"type":["string","null"]},"controlId":{"type":["string","null"]},)"
         R"("key":{"type":["string","null"]},"dedupeKey":{"type":["string","null"]},)"
         R"("lastError":{"type":["string","null"]},)"
         R"("originId":{"type":["integer","null"],"description":"the message this one is an edited or routed copy of"},)"
         R"("lane":{"type":"integer"},"tier":{"type":"integer"},"bytes":{"type":"integer"},)"
         R"("charset":{"type":["string","null"]},"deliveries":{"type":"array","items":)" +
         deliverySchema(true) + "}}}";
}

constexpr const char* kPayloadSchema = R"({"type":"object","properties":{
"messageId":{"type":"integer"},"interface":{"type":"string"},
"encoding":{"enum":["text","base64"]},"charset":{"type":["string","null"],"description":"the charset the bytes were read in"},
"payload":{"type":"string"},
"outputs":{"type":"array","items":{"type":"object","properties":{"destination":{"type":"string"},
"encoding":{"enum":["text","base64"]},"charset":{"type":["string","null"]},"output":{"type":"string"}}}}}})";

constexpr const char* kEditRequest = R"({"type":"object","required":["payload"],"properties":{
"payload":{"type":"string","minLength":1,"description":"the corrected message as text"},
"charset":{"enum":["utf-8","iso-8859-1"],"description":"the bytes the copy is stored as; default: the charset the original was read in"},
"reason":{"type":"string","maxLength":1000}}})";

constexpr const char* kEditAnswer = R"({"type":"object","properties":{
"messageId":{"type":"integer","description":"the copy"},"originId":{"type":"integer"},
"interface":{"type":"string"},"status":{"enum":["pending","filtered"]},
"replaced":{"type":"array","items":{"type":"string"},"description":"the original's quarantined destinations, now filtered"},
"originalStatus":{"type":["string","null"]}}})";

}  // namespace

std::vector<Route> messageBrowserRoutes(AuthDeps* auth, EngineView* engine) {
  std::shared_ptr<Deps> d;
  if (auth) d = std::make_shared<Deps>(Deps{*auth, engine, auth->pool, auth->audit});
  auto bind = [d](void (*fn)(Deps&, const ApiRequest&, ApiRespond)) {
    return bindHandler(d, fn, "no message store behind this API");
  };
  auto route = [](std::string method, std::string path, std::string id, std::string summary,
                  Requirement req, ApiHandler h, std::string in, std::string out,
                  std::map<std::string, std::string> query = {}) {
    return Route{std::move(method), std::move(path), std::move(id),  std::move(summary),
                 "messages",        req,             std::move(h),   std::move(in),
                 std::move(out),    std::move(query)};
  };
  std::vector<Route> routes;
  routes.push_back(route(
      "GET", "/api/v1/interfaces/{name}/messages", "listMessages",
      "An interface's messages newest first, paged by id, filtered by status, time, type, "
      "control id or key",
      Requirement::toRead(Role::Viewer), bind(listMessages), {}, pageSchema(),
      {{"before", "messages with a smaller id (the previous page's `next`)"},
       {"limit", "messages per page: 1-500 (default 50)"},
       {"status", "pending, sent, filtered, quarantined or duplicate"},
       {"from", "received at or after this RFC 3339 time"},
       {"to", "received before this RFC 3339 time"},
       {"type",
        "the message type (HL7 MSH-9, components joined by ^): equal, or its first "
        "components (ADT^A01 finds ADT^A01^ADT_A01; ADT finds every ADT)"},
       {"control_id", "the control id (HL7 MSH-10), exactly"},
       {"key", "the ordering key's value (e.g. the patient's MRN), exactly"}}));
  routes.push_back(route("GET", "/api/v1/messages/{id}", "getMessage",
                         "One message: what it is, and what became of it at each destination",
                         Requirement::toRead(Role::Viewer), bind(getMessage), {},
                         messageSchema()));
  routes.push_back(route("GET", "/api/v1/messages/{id}/payload", "getMessagePayload",
                         "A message's payload and saved outputs as text (audited before it is "
                         "read)",
                         Requirement::toRead(Role::Viewer, kPayloads), bind(getPayload), {},
                         kPayloadSchema));
  auto editRoute = route(
      "POST", "/api/v1/messages/{id}/edit", "editMessage",
      "Store a corrected copy (keys read from the new payload) and filter the original's "
      "quarantined deliveries as replaced by it",
      Requirement::toChange(Role::Operator), bind(edit), kEditRequest, kEditAnswer);
  editRoute.successStatus = 201;
  routes.push_back(std::move(editRoute));
  return routes;
}

}  // namespace ductus::api
