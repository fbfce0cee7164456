#include "api/message_browser.h"

#include <openssl/evp.h>

#include <map>
#include <memory>

#include "api/audit/audit_log.h"
#include "api/auth/handler_support.h"
#include "api/message_routes.h"
#include "common/hl7/mllp.h"
#include "common/text.h"
#include "schema/message_actions.h"
#include "schema/message_pages.h"
#include "schema/store_types.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;
using store::BrowseQuery;

using Deps = MessageDeps;

constexpr const char* kLatin1 = "iso-8859-1";
constexpr const char* kUtf8 = "utf-8";

// A message's deliveries as the API shows them: destination, status and
// attempts, and with `full` the last error, when, and whether an output
// was saved.
json deliveriesOf(const std::vector<store::DeliveryRow>& rows, bool full) {
  json out = json::array();
  for (auto& d : rows) {
    json o = {{"destination", d.destination},
              {"status", store::statusName(d.status)},
              {"attempts", d.attempts}};
    if (full) {
      o["lastError"] = orNull(d.lastError);
      o["updatedAt"] = orNull(d.updatedAt);
      o["outputSaved"] = d.outputSaved;
    }
    out.push_back(std::move(o));
  }
  return out;
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
    q.status = store::parseStatus(*s);
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
  store::messagePage(d.pool, req.params.at("name"), *q, [respond](Result<store::MessagePage> r) {
    if (!r) return respond(errorResponse(r.error()));
    json items = json::array();
    for (auto& m : r->rows)
      items.push_back({{"id", m.id},
                       {"receivedAt", m.receivedAt},
                       {"status", store::statusName(m.status)},
                       {"type", orNull(m.type)},
                       {"controlId", orNull(m.controlId)},
                       {"key", orNull(m.key)},
                       {"lastError", orNull(m.lastError)},
                       {"originId", m.originId ? json(*m.originId) : json()},
                       {"deliveries", deliveriesOf(m.deliveries, false)}});
    json next = r->next ? json(*r->next) : json();
    respond(jsonOk(200, {{"items", items}, {"next", next}}));
  });
}

// ---- GET /api/v1/messages/{id} ---------------------------------------------

void getMessage(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  store::messageDetail(d.pool, *id, [respond](Result<store::MessageDetail> r) {
    if (!r) return respond(errorResponse(r.error()));
    auto& m = r->row;
    respond(jsonOk(200, {{"id", m.id},
                         {"interface", r->interface},
                         {"receivedAt", m.receivedAt},
                         {"status", store::statusName(m.status)},
                         {"type", orNull(m.type)},
                         {"controlId", orNull(m.controlId)},
                         {"key", orNull(m.key)},
                         {"dedupeKey", orNull(r->dedupeKey)},
                         {"lastError", orNull(m.lastError)},
                         {"originId", m.originId ? json(*m.originId) : json()},
                         {"lane", r->lane},
                         {"tier", r->tier},
                         {"bytes", r->bytes},
                         {"charset", orNull(r->charset)},
                         {"deliveries", deliveriesOf(m.deliveries, true)}}));
  });
}

// ---- GET /api/v1/messages/{id}/payload -------------------------------------

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
    store::messagePayload(d.pool, id, [id, respond](Result<store::MessagePayload> r) {
      if (!r) return respond(errorResponse(r.error()));
      json body = decoded(r->payload, r->charset, "payload");
      body["messageId"] = id;
      body["interface"] = r->interface;
      json outputs = json::array();
      for (auto& out : r->outputs) {
        json o = decoded(out.bytes, r->charset, "output");
        o["destination"] = out.destination;
        outputs.push_back(std::move(o));
      }
      body["outputs"] = std::move(outputs);
      respond(jsonOk(200, body));
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

// The copy, the original's quarantined deliveries filtered as replaced by
// it and its audit row, in one transaction: no row, no copy.
void storeCopy(Deps& d, std::shared_ptr<Edit> e, AuditEntry entry, ApiRespond respond) {
  const auto& k = e->keys;
  store::EditedCopy copy{e->original, k.tier,         k.lane,   k.dedupeKey,
                         k.destinationIds, e->payload, k.columns};
  auto audit = [&d, e, entry](const store::CopyStored& x) -> Result<SqlStatement> {
    auto a = entry;
    a.detail["copyId"] = x.copyId;
    a.detail["replaced"] = x.replaced;
    a.detail["bytes"] = e->payload.size();
    a.detail["charset"] = e->charset;
    if (e->reason) a.detail["reason"] = *e->reason;
    return d.audit.statement(a);
  };
  store::storeEditedCopy(d.pool, std::move(copy), audit,
                         [&d, e, respond](Result<store::CopyStored> r) {
                           if (!r) return respond(errorResponse(r.error()));
                           // After the commit, so the loops read the copy's rows.
                           if (d.engine) d.engine->wake(e->interface);
                           respond(jsonOk(
                               201, {{"messageId", r->copyId},
                                     {"originId", e->original},
                                     {"interface", e->interface},
                                     {"status", store::statusName(r->copyStatus)},
                                     {"replaced", r->replaced},
                                     {"originalStatus", r->originalStatus
                                                            ? json(store::statusName(
                                                                  *r->originalStatus))
                                                            : json()}}));
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
  // The original's interface (whose keys the copy is read with) and the
  // charset it was read in (the copy's, unless the caller names one).
  store::editSource(d.pool, e->original, [&d, e, text = *text, charset, entry,
                                          respond](Result<store::EditSource> r) mutable {
    if (!r) return respond(errorResponse(r.error()));
    e->interface = r->interface;
    e->charset = charset ? *charset : r->charset.value_or(kUtf8);
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
      return respond(errorResponse(Error{"no engine behind this API", ErrorKind::NotRunHere}));
    auto keys = d.engine->readKeys(e->interface, e->payload);
    if (!keys) return respond(errorResponse(keys.error()));
    e->keys = std::move(*keys);
    auto a = entry;
    a.targetName = e->interface;
    storeCopy(d, e, a, respond);
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
