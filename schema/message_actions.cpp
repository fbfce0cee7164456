#include "schema/message_actions.h"

#include <algorithm>
#include <memory>
#include <set>

namespace ductus::store {
namespace {

using LeasePtr = PgPool::LeasePtr;
using Results = std::vector<PgResult>;

// Postgres array literals, as text parameters.
std::string intArray(const std::vector<int64_t>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "}";
}
std::string textArray(const std::vector<std::string>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += '"';
    for (char c : v[i]) {
      if (c == '"' || c == '\\') s += '\\';
      s += c;
    }
    s += '"';
  }
  return s + "}";
}

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

// Locks the messages' rows in id order before their deliveries change.
// Columns: id, interface name.
SqlStatement lockMessages(const std::vector<int64_t>& ids) {
  return {
      "SELECT m.id, i.name FROM messages m JOIN interfaces i ON i.id = m.interface_id "
      "WHERE m.id = ANY ($1::int8[]) ORDER BY m.id FOR UPDATE OF m",
      {intArray(ids)}};
}

// Every id was found, or the NotFound naming those that were not.
Status allFound(const std::vector<int64_t>& ids, const PgResult& locked) {
  std::set<int64_t> found;
  for (int i = 0; i < locked.rows(); ++i) found.insert(locked.integer(i, 0));
  std::string missing;
  for (int64_t id : ids)
    if (!found.count(id)) missing += (missing.empty() ? "" : ", ") + std::to_string(id);
  if (missing.empty()) return {};
  return Error{"no message " + missing, ErrorKind::NotFound};
}

// The first column's values, sorted (an UPDATE's RETURNING has no order).
std::vector<std::string> sortedNames(const PgResult& r) {
  std::vector<std::string> v;
  for (int i = 0; i < r.rows(); ++i) v.emplace_back(r.text(i, 0));
  std::sort(v.begin(), v.end());
  return v;
}

// The message's status from its deliveries, as Store::settle sets it
// (pending while any delivery is, else quarantined, else sent, else
// filtered); a duplicate keeps its status.
constexpr const char* kSettleStatus =
    "UPDATE messages m SET status = (SELECT CASE WHEN bool_or(d.status = 0) THEN 0 "
    "WHEN bool_or(d.status = 3) THEN 3 WHEN bool_or(d.status = 1) THEN 1 ELSE 2 END "
    "FROM deliveries d WHERE d.message_id = m.id AND d.tier = m.tier "
    "AND d.received_at = m.received_at) "
    "WHERE m.id = $1::int8 AND m.status <> 4";

// Filters the message's quarantined deliveries with $2 as their last_error.
constexpr const char* kFilterQuarantined =
    "UPDATE deliveries d SET status = 2, last_error = $2, updated_at = now() "
    "FROM messages m, destinations dst "
    "WHERE m.id = $1::int8 AND d.message_id = m.id AND d.tier = m.tier "
    "AND d.received_at = m.received_at AND dst.id = d.destination_id AND d.status = 3 "
    "RETURNING dst.name";

std::optional<MessageStatus> statusRow(const PgResult& r) {
  if (r.rows() == 0) return std::nullopt;
  return statusFromColumn(r.integer(0, 0));
}

// The steps, then the audit step made from `read` of their results, run
// on one connection; cb hears `read` of the committed results.
template <typename T>
void runAction(PgPool& pool, std::vector<TxStep> steps, std::function<T(const Results&)> read,
               AuditStatement<T> audit, std::function<void(Result<T>)> cb) {
  steps.push_back([read, audit](const Results& r) { return audit(read(r)); });
  pool.acquire([steps = std::move(steps), read, cb](Result<LeasePtr> lease) mutable {
    if (!lease) return cb(lease.error());
    runTransactionRetried(
        *lease, std::move(steps),
        [read, cb](Result<Results> r) {
          if (!r) return cb(r.error());
          cb(read(*r));
        },
        kActionTries);
  });
}

}  // namespace

// ---- resend -------------------------------------------------------------------

void resendMessages(PgPool& pool, std::vector<int64_t> ids,
                    std::optional<std::vector<std::string>> destinations,
                    AuditStatement<Resent> audit, std::function<void(Result<Resent>)> cb) {
  std::vector<TxStep> steps;
  steps.push_back(fixedStep(lockMessages(ids)));
  steps.push_back([ids, destinations](const Results& r) -> Result<SqlStatement> {
    if (auto s = allFound(ids, r[0]); !s) return s.error();
    std::string sql =
        "UPDATE deliveries d SET status = 0, last_error = NULL, updated_at = now() "
        "FROM messages m, destinations dst "
        "WHERE m.id = ANY ($1::int8[]) AND d.message_id = m.id AND d.tier = m.tier "
        "AND d.received_at = m.received_at AND dst.id = d.destination_id ";
    std::vector<Param> params{intArray(ids)};
    if (destinations) {
      sql += "AND dst.name = ANY ($2::text[]) AND d.status <> 0 ";
      params.push_back(textArray(*destinations));
    } else {
      sql += "AND d.status = 3 ";
    }
    sql += "RETURNING d.message_id, dst.name";
    return SqlStatement{sql, params};
  });
  steps.push_back([destinations](const Results& r) -> Result<SqlStatement> {
    if (r[1].rows() == 0)
      return Error{destinations ? "no finished delivery to the named destinations (pending "
                                  "already, or no such destination)"
                                : "no quarantined delivery to resend",
                   ErrorKind::NothingToChange};
    std::set<int64_t> changed;
    for (int i = 0; i < r[1].rows(); ++i) changed.insert(r[1].integer(i, 0));
    return SqlStatement{
        "UPDATE messages SET status = 0 WHERE id = ANY ($1::int8[]) AND status NOT IN (0, 4)",
        {intArray(std::vector<int64_t>(changed.begin(), changed.end()))}};
  });
  std::function<Resent(const Results&)> read = [](const Results& r) {
    Resent out;
    for (int i = 0; i < r[0].rows(); ++i)
      out.messages.push_back({r[0].integer(i, 0), std::string(r[0].text(i, 1))});
    for (int i = 0; i < r[1].rows(); ++i) {
      ResentDelivery d{r[1].integer(i, 0), {}, std::string(r[1].text(i, 1))};
      for (auto& m : out.messages)
        if (m.id == d.messageId) d.interface = m.interface;
      out.deliveries.push_back(std::move(d));
    }
    out.messagesResent = r[2].affected();
    return out;
  };
  runAction(pool, std::move(steps), read, std::move(audit), std::move(cb));
}

// ---- dismiss ------------------------------------------------------------------

void dismissMessage(PgPool& pool, int64_t id, std::string why, AuditStatement<Dismissed> audit,
                    std::function<void(Result<Dismissed>)> cb) {
  std::vector<TxStep> steps;
  steps.push_back(fixedStep(lockMessages({id})));
  steps.push_back([id, why](const Results& r) -> Result<SqlStatement> {
    if (auto s = allFound({id}, r[0]); !s) return s.error();
    return SqlStatement{kFilterQuarantined, {std::to_string(id), why}};
  });
  steps.push_back([id](const Results& r) -> Result<SqlStatement> {
    if (r[1].rows() == 0)
      return Error{"the message has no quarantined delivery", ErrorKind::NothingToChange};
    return SqlStatement{std::string(kSettleStatus) + " RETURNING m.status", {std::to_string(id)}};
  });
  std::function<Dismissed(const Results&)> read = [id](const Results& r) {
    Dismissed out;
    out.messageId = id;
    out.interface = std::string(r[0].text(0, 1));
    for (int i = 0; i < r[1].rows(); ++i) out.destinations.emplace_back(r[1].text(i, 0));
    out.messageStatus = statusRow(r[2]);
    return out;
  };
  runAction(pool, std::move(steps), read, std::move(audit), std::move(cb));
}

// ---- edit ---------------------------------------------------------------------

namespace {

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

}  // namespace

void storeEditedCopy(PgPool& pool, EditedCopy copy, AuditStatement<CopyStored> audit,
                     std::function<void(Result<CopyStored>)> cb) {
  auto e = std::make_shared<EditedCopy>(std::move(copy));
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
    return SqlStatement{kInsertCopy,
                        {std::string(r[0].text(0, 1)), std::to_string(e->tier),
                         std::to_string(e->lane), e->dedupeKey, intArray(e->destinationIds), id,
                         hexBytea(e->payload), e->columns.type, e->columns.controlId,
                         e->columns.keyValue, e->columns.charset}};
  });
  // 3: the original's quarantined deliveries are done with.
  steps.push_back([id](const Results& r) -> Result<SqlStatement> {
    return SqlStatement{kFilterQuarantined,
                        {id, "replaced by edited copy " + std::string(r[2].text(0, 0))}};
  });
  // 4: the original's status follows its deliveries (if it has any).
  steps.push_back([id](const Results&) -> Result<SqlStatement> {
    return SqlStatement{std::string(kSettleStatus) +
                            " AND EXISTS (SELECT 1 FROM deliveries d "
                            "WHERE d.message_id = m.id AND d.tier = m.tier AND d.received_at = "
                            "m.received_at) RETURNING m.status",
                        {id}};
  });
  std::function<CopyStored(const Results&)> read = [](const Results& r) {
    CopyStored out;
    out.copyId = r[2].integer(0, 0);
    out.copyStatus = statusFromColumn(r[2].integer(0, 1));
    out.replaced = sortedNames(r[3]);
    out.originalStatus = statusRow(r[4]);
    return out;
  };
  runAction(pool, std::move(steps), read, std::move(audit), std::move(cb));
}

}  // namespace ductus::store
