#include "api/message_browser.h"

#include <openssl/evp.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>

#include "api/audit/audit_log.h"
#include "api/auth/handler_support.h"
#include "api/message_routes.h"
#include "common/config/model.h"
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

// A message's deliveries as the API shows them: destination, status,
// attempts, the last error (a page's cut to store::kListErrorChars) and
// whether it waits on a paused destination; with `full` also when it last
// changed and whether an output was saved.
json deliveriesOf(const std::vector<store::DeliveryRow>& rows, bool full) {
  json out = json::array();
  for (auto& d : rows) {
    json o = {{"destination", d.destination},
              {"status", store::statusName(d.status)},
              {"attempts", d.attempts},
              {"lastError", orNull(d.lastError)},
              {"paused", d.paused}};
    if (full) {
      o["updatedAt"] = orNull(d.updatedAt);
      o["outputSaved"] = d.outputSaved;
    }
    out.push_back(std::move(o));
  }
  return out;
}

json optId(const std::optional<int64_t>& id) { return id ? json(*id) : json(); }

// What a list row and the single message share: what the message is, what
// became of it, and the marks that say why it looks as it does.
json messageJson(const store::MessageRow& m, bool full) {
  return {{"id", m.id},
          {"interface", m.interface},
          {"receivedAt", m.receivedAt},
          {"status", store::statusName(m.status)},
          {"type", orNull(m.type)},
          {"controlId", orNull(m.controlId)},
          {"key", orNull(m.key)},
          {"lastError", orNull(m.lastError)},
          {"originId", optId(m.originId)},
          {"duplicateOf", optId(m.duplicateOf)},
          {"editedFrom", optId(m.editedFrom)},
          {"editedTo", m.editedTo},
          {"deliveries", deliveriesOf(m.deliveries, full)}};
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

// A payload check's problems as JSON: the text, and where when the check
// knows (line and column from 1, segment, field).
json problemsJson(const PayloadCheckInfo& c) {
  json out = json::array();
  for (auto& p : c.problems) {
    json o = {{"text", p.text}};
    if (p.line) o["line"] = p.line;
    if (p.column) o["column"] = p.column;
    if (!p.segment.empty()) o["segment"] = p.segment;
    if (!p.field.empty()) o["field"] = p.field;
    out.push_back(std::move(o));
  }
  return out;
}

// "line 1, MSH.2: MSH-2 is shorter than 4 encoding characters".
std::string problemText(const PayloadProblemInfo& p) {
  std::string where;
  if (p.line) where = "line " + std::to_string(p.line);
  if (p.column) where += ", column " + std::to_string(p.column);
  if (!p.field.empty())
    where += (where.empty() ? "" : ", ") + p.field;
  else if (!p.segment.empty())
    where += (where.empty() ? "" : ", ") + p.segment + " segment";
  return where.empty() ? p.text : where + ": " + p.text;
}

// 400 invalid_payload: what intake would refuse, named where it is.
net::HttpResponse invalidPayload(const std::string& interface, const PayloadCheckInfo& c) {
  std::string text = "the payload is not what interface " + interface + "'s intake takes (" +
                     c.format + "): " + problemText(c.problems.front());
  return jsonOk(400, {{"error", "invalid_payload"},
                      {"message", text},
                      {"format", c.format},
                      {"problems", problemsJson(c)}});
}

// The payload's text as the bytes the interface reads: ISO-8859-1 when
// asked, else UTF-8 as given; nullopt when ISO-8859-1 can't write it.
std::optional<std::string> payloadBytes(std::string text, const std::string& charset) {
  if (charset == kLatin1) return utf8AsLatin1(text);
  return text;
}

// ---- GET /api/v1/interfaces/{name}/messages, GET /api/v1/messages ---------

// An RFC 3339 time (timeQuery checked its form) as microseconds since 1970.
int64_t rfc3339Micros(const std::string& text) {
  static const std::regex re(
      R"(^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.(\d{1,6}))?([Zz]|([+-])(\d{2}):(\d{2}))$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return 0;
  auto n = [&](int i) { return m[i].matched ? std::stoll(m[i].str()) : 0LL; };
  using namespace std::chrono;
  sys_days date = year_month_day{year(static_cast<int>(n(1))), month(static_cast<unsigned>(n(2))),
                                 day(static_cast<unsigned>(n(3)))};
  int64_t us = duration_cast<microseconds>(date.time_since_epoch()).count() +
               ((n(4) * 60 + n(5)) * 60 + n(6)) * 1'000'000;
  if (m[8].matched) {
    std::string f = m[8].str();
    f.resize(6, '0');
    us += std::stoll(f);
  }
  if (m[10].matched) {
    int64_t offset = (n(11) * 60 + n(12)) * 60 * 1'000'000;
    us += m[10].str() == "+" ? -offset : offset;
  }
  return us;
}

// A list as asked: the store's query, and the content search's text as
// given (for its audit row, which records its length only).
struct Browse {
  BrowseQuery q;
  std::optional<std::string> text;
};

// The query's filters, or the 400 naming the one that is wrong and what it
// takes.
Result<Browse> browseQuery(const ApiRequest& req, bool search) {
  Browse b;
  BrowseQuery& q = b.q;
  for (auto [name, field] : {std::pair{"before", &q.before}, std::pair{"after", &q.after}}) {
    auto v = positiveQuery(req, name);
    if (!v)
      return Error{"`" + std::string(name) + "` must be a message id (a whole number)",
                   ErrorKind::Invalid};
    *field = *v;
  }
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
  if (auto o = text("order")) {
    if (*o == "oldest")
      q.order = store::BrowseOrder::OldestFirst;
    else if (*o != "newest")
      return Error{"`order` must be newest or oldest", ErrorKind::Invalid};
  }
  if (auto s = text("status")) {
    if (*s == "errors") {
      q.errors = true;
    } else {
      q.status = store::parseStatus(*s);
      if (!q.status)
        return Error{"`status` must be pending, sent, filtered, quarantined, duplicate or errors",
                     ErrorKind::Invalid};
    }
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
  if (auto t = text("q")) {
    if (t->empty() || t->size() > kContentTextMaxBytes)
      return Error{"`q` must be 1 to " + std::to_string(kContentTextMaxBytes) + " bytes of text",
                   ErrorKind::Invalid};
    // Every payload of the window is read: the window is bounded, and so
    // is each page's read (store::kContentScanRows).
    std::string window = "`q` needs `from` and `to`, at most " +
                         std::to_string(kContentWindowHours) + " hours apart";
    if (!q.from || !q.to) return Error{window, ErrorKind::Invalid};
    int64_t span = rfc3339Micros(*q.to) - rfc3339Micros(*q.from);
    if (span <= 0 || span > kContentWindowHours * 3600 * int64_t{1'000'000})
      return Error{window + " (and `to` after `from`)", ErrorKind::Invalid};
    // Payloads are bytes: the text as UTF-8, and as ISO-8859-1 where that
    // differs (the bytes of an interface that reads that charset).
    q.contains.push_back(*t);
    if (auto latin1 = utf8AsLatin1(*t); latin1 && *latin1 != *t) q.contains.push_back(*latin1);
    b.text = *t;
  }
  if (search && !q.controlId && !q.key && !b.text)
    return Error{"a search across interfaces needs `control_id`, `key` or `q`", ErrorKind::Invalid};
  return b;
}

json pageJson(const store::MessagePage& p, bool content) {
  json items = json::array();
  for (auto& m : p.rows) items.push_back(messageJson(m, false));
  json body = {
      {"items", std::move(items)},
      {"next", optId(p.next)},
      {"total", p.total ? json{{"count", p.total->count}, {"exact", p.total->exact}} : json()}};
  if (content) {
    body["scanned"] = p.scanned;
    body["complete"] = p.complete;
  }
  return body;
}

// Runs the page: an interface's when named, else every interface's.
void runBrowse(Deps& d, std::optional<std::string> interface, Browse b, ApiRespond respond) {
  bool content = b.text.has_value();
  auto done = [respond, content](Result<store::MessagePage> r) {
    if (!r) return respond(errorResponse(r.error()));
    respond(jsonOk(200, pageJson(*r, content)));
  };
  if (interface)
    store::messagePage(d.pool, *interface, std::move(b.q), done);
  else
    store::messageSearch(d.pool, std::move(b.q), done);
}

// A content search reads payloads, so it needs `payloads` as a payload
// read does, and its audit row is written first (no row, no search: 503).
// The row says who searched which interface (or all) over which window,
// with which other filters, and how long the text was; not the text
// itself, nor the control id or key searched for: those are the patient's
// data (a name, an MRN), and the audit log is read by holders of `audit`,
// who need not hold `payloads`. That a search was made, by whom, where and
// when is what an access review asks.
void browse(Deps& d, const ApiRequest& req, std::optional<std::string> interface,
            ApiRespond respond) {
  auto b = browseQuery(req, !interface);
  if (!b) return respond(errorResponse(b.error()));
  if (!b->text) return runBrowse(d, std::move(interface), std::move(*b), respond);
  if (!(req.caller->permissions & kPayloads))
    return respond(
        jsonError(403, "forbidden", "a content search (`q`) needs the payloads permission"));
  auto entry = auditEntryFor(*req.caller, "message.search");
  entry.targetKind = "interface";
  entry.targetName = interface.value_or("");
  const auto& q = b->q;
  json filters = json::array();
  for (auto [name, given] :
       {std::pair{"control_id", q.controlId.has_value()}, std::pair{"key", q.key.has_value()}})
    if (given) filters.push_back(name);
  entry.detail = {{"interface", interface ? json(*interface) : json()},
                  {"from", *q.from},
                  {"to", *q.to},
                  {"order", q.order == store::BrowseOrder::OldestFirst ? "oldest" : "newest"},
                  {"status", q.errors   ? json("errors")
                             : q.status ? json(store::statusName(*q.status))
                                        : json()},
                  {"type", orNull(q.type)},
                  {"filters", std::move(filters)},
                  {"textBytes", b->text->size()}};
  d.audit.write(entry, [&d, interface, asked = std::move(*b), respond](Status s) mutable {
    if (!s.ok()) {
      auto r = jsonError(503, "unavailable",
                         s.error().message + " (no content search without its audit row)");
      r.headers.emplace_back("Retry-After", "1");
      return respond(r);
    }
    runBrowse(d, std::move(interface), std::move(asked), respond);
  });
}

void listMessages(Deps& d, const ApiRequest& req, ApiRespond respond) {
  browse(d, req, req.params.at("name"), std::move(respond));
}

void searchMessages(Deps& d, const ApiRequest& req, ApiRespond respond) {
  browse(d, req, std::nullopt, std::move(respond));
}

// ---- GET /api/v1/messages/{id} ---------------------------------------------

void getMessage(Deps& d, const ApiRequest& req, ApiRespond respond) {
  auto id = positiveId(req.params.at("id"));
  if (!id) return respond(jsonError(400, "invalid", "the message id must be a positive integer"));
  store::messageDetail(d.pool, *id, [respond](Result<store::MessageDetail> r) {
    if (!r) return respond(errorResponse(r.error()));
    json body = messageJson(r->row, true);
    body["dedupeKey"] = orNull(r->dedupeKey);
    body["lane"] = r->lane;
    body["tier"] = r->tier;
    body["bytes"] = r->bytes;
    body["charset"] = orNull(r->charset);
    respond(jsonOk(200, body));
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
    auto bytes = payloadBytes(std::move(text), e->charset);
    if (!bytes)
      return respond(jsonError(400, "invalid",
                               "the payload has characters ISO-8859-1 can't write; "
                               "give \"charset\": \"utf-8\""));
    e->payload = std::move(*bytes);
    if (!d.engine)
      return respond(errorResponse(Error{"no engine behind this API", ErrorKind::NotRunHere}));
    // What the interface's intake would refuse (its format, its size) is
    // refused here before anything is written: a copy intake would never
    // have stored must not retire the original's deliveries.
    auto check = d.engine->checkPayload(e->interface, e->payload);
    if (!check) return respond(errorResponse(check.error()));
    if (!check->problems.empty()) return respond(invalidPayload(e->interface, *check));
    // A framing byte would leave an MLLP destination as two messages,
    // the second never stored: refused in every format (intake's check
    // looks for it in HL7 only, the format MLLP carries).
    if (auto s = hl7::mllp::refuseFramingBytes(e->payload, "the payload"); !s) {
      PayloadCheckInfo framing{check->format, check->maxBytes, {}};
      framing.problems.emplace_back().text = s.error().message;
      return respond(invalidPayload(e->interface, framing));
    }
    auto keys = d.engine->readKeys(e->interface, e->payload);
    if (!keys) return respond(errorResponse(keys.error()));
    e->keys = std::move(*keys);
    auto a = entry;
    a.targetName = e->interface;
    storeCopy(d, e, a, respond);
  });
}

// ---- POST /api/v1/interfaces/{name}/try -----------------------------------

// One destination's outcome, its output as the text the payload read
// would show (decoded()).
json tryOutcomeJson(const TryOutcomeInfo& t, const std::optional<std::string>& charset) {
  json o = {{"destination", t.destination}, {"route", t.route},
            {"outcome", t.outcome},         {"output", nullptr},
            {"reason", orNull(t.reason)},   {"error", orNull(t.error)},
            {"runaway", orNull(t.runaway)}, {"millis", t.millis}};
  if (t.output) {
    json out = decoded(*t.output, charset, "output");
    o["output"] = out["output"];
    o["encoding"] = out["encoding"];
    o["charset"] = out["charset"];
  }
  return o;
}

// The payload checked as intake checks it, then, when intake would take
// it, each destination's function run on it in the engine's workers
// (EngineView::tryPayload): nothing stored, nothing sent, the scripts'
// services mocked. It needs `payloads` (its answer is made of the
// payload) and its audit row is written first, as a payload read's.
void tryInterface(Deps& d, const ApiRequest& req, ApiRespond respond) {
  std::string name = req.params.at("name");
  auto body = bodyObject(req);
  if (!body) return respond(errorResponse(body.error()));
  auto text = stringField(*body, "payload");
  if (!text || text->empty())
    return respond(jsonError(400, "invalid",
                             "give {\"payload\": the message as text, \"charset\": \"utf-8\" | "
                             "\"iso-8859-1\"}"));
  std::optional<std::string> charset;
  if (body->contains("charset")) {
    charset = stringField(*body, "charset");
    if (!charset || (*charset != kUtf8 && *charset != kLatin1))
      return respond(jsonError(400, "invalid", "`charset` must be utf-8 or iso-8859-1"));
  }
  const config::InterfaceConfig* cfg = d.engine ? d.engine->interfaceConfig(name) : nullptr;
  if (!cfg)
    return respond(errorResponse(
        Error{"interface " + name + " is not run by this engine", ErrorKind::NotFound}));
  // The interface's charset unless the caller names one, as an edit keeps
  // the original's.
  std::string cs = charset ? *charset : cfg->charset == config::Charset::Latin1 ? kLatin1 : kUtf8;
  auto bytes = payloadBytes(std::move(*text), cs);
  if (!bytes)
    return respond(jsonError(400, "invalid",
                             "the payload has characters ISO-8859-1 can't write; "
                             "give \"charset\": \"utf-8\""));
  auto entry = auditEntryFor(*req.caller, "message.try");
  entry.targetKind = "interface";
  entry.targetName = name;
  entry.detail = {{"bytes", bytes->size()}, {"charset", cs}};
  // The row first, committed on a connection of its own: no output made of
  // a payload unless the run is on record.
  d.audit.write(entry, [&d, name, cs, payload = std::move(*bytes), respond](Status s) mutable {
    if (!s.ok()) {
      auto r =
          jsonError(503, "unavailable", s.error().message + " (no dry run without its audit row)");
      r.headers.emplace_back("Retry-After", "1");
      return respond(r);
    }
    auto check = d.engine->checkPayload(name, payload);
    if (!check) return respond(errorResponse(check.error()));
    json checked = {{"ok", check->problems.empty()},
                    {"format", check->format},
                    {"problems", problemsJson(*check)}};
    if (!check->problems.empty())
      checked["message"] = "intake would refuse it: " + problemText(check->problems.front());
    // Intake would refuse it: no transform would ever see it.
    if (!check->problems.empty())
      return respond(jsonOk(200, {{"interface", name},
                                  {"check", std::move(checked)},
                                  {"ran", false},
                                  {"destinations", json::array()}}));
    std::optional<std::string> outCharset;
    if (cs == kLatin1) outCharset = cs;
    d.engine->tryPayload(name, std::move(payload),
                         [name, outCharset, checked = std::move(checked),
                          respond](Result<std::vector<TryOutcomeInfo>> r) {
                           if (!r) return respond(errorResponse(r.error()));
                           json dests = json::array();
                           for (auto& t : *r) dests.push_back(tryOutcomeJson(t, outCharset));
                           respond(jsonOk(200, {{"interface", name},
                                                {"check", checked},
                                                {"ran", true},
                                                {"destinations", std::move(dests)}}));
                         });
  });
}

// ---- schemas -------------------------------------------------------------

constexpr const char* kStatusEnum =
    R"({"enum":["pending","sent","filtered","quarantined","duplicate"]})";

std::string deliverySchema(bool full) {
  std::string s =
      R"({"type":"object","required":["destination","status","attempts","lastError","paused")" +
      std::string(full ? R"(,"updatedAt","outputSaved")" : "") +
      R"(],"properties":{"destination":{"type":"string"},)"
      R"("status":{"enum":["pending","sent","filtered","quarantined"]},"attempts":{"type":"integer"},)"
      R"("lastError":{"type":["string","null"],"description":)" +
      (full
           ? std::string(
                 R"("the last try's error: why it was quarantined, or why it waits for a retry")")
           : std::string(
                 R"("the last try's error (why it was quarantined, or why it waits for a retry), its first )") +
                 std::to_string(store::kListErrorChars) +
                 R"( characters; the message shows it whole")") +
      R"(},"paused":{"type":"boolean","description":"pending, and its destination is paused: it waits for a resume, not a retry"})";
  if (full) s += R"(,"updatedAt":{"type":["string","null"]},"outputSaved":{"type":"boolean"})";
  return s + "}}";
}

// The properties a list row and the single message share (messageJson).
std::string messageProperties(bool full) {
  return std::string(R"("id":{"type":"integer"},"interface":{"type":"string"},)"
                     R"("receivedAt":{"type":"string"},"status":)") +
         kStatusEnum +
         R"(,"type":{"type":["string","null"]},"controlId":{"type":["string","null"]},)"
         R"("key":{"type":["string","null"]},)"
         R"("lastError":{"type":["string","null"],"description":"the message's own: why intake did not queue it (a duplicate, no destination, refused); a delivery's is under deliveries"},)"
         R"("originId":{"type":["integer","null"],"description":"the message this one is an edited or routed copy of"},)"
         R"("duplicateOf":{"type":["integer","null"],"description":"a duplicate (answered as accepted, never queued): the message that holds its dedupe key, while the key is kept"},)"
         R"("editedFrom":{"type":["integer","null"],"description":"an edited copy: its original, as POST /messages/{id}/edit stored it"},)"
         R"("editedTo":{"type":"array","items":{"type":"integer"},"description":"this message's edited copies, oldest first"},)"
         R"("deliveries":{"type":"array","items":)" +
         deliverySchema(full) + "}";
}

constexpr const char* kMessageRequired =
    R"("id","interface","receivedAt","status","type","controlId","key","lastError","originId","duplicateOf","editedFrom","editedTo","deliveries")";

std::string pageSchema() {
  return std::string(R"({"type":"object","required":["items","next","total"],"properties":{)") +
         R"("items":{"type":"array","items":{"type":"object","required":[)" + kMessageRequired +
         R"(],"properties":{)" + messageProperties(false) + R"(}}},)" +
         R"("next":{"type":["integer","null"],"description":"pass as `before` (newest first) or `after` (order=oldest) for the next page; null: the last page"},)"
         R"("total":{"type":["object","null"],"required":["count","exact"],"description":"the messages the filters match (the cursor aside); null for a content search, q",)"
         R"("properties":{"count":{"type":"integer"},"exact":{"type":"boolean","description":"false: at least `count` ()" +
         std::to_string(store::kTotalCountCap) +
         R"(), not counted further"}}},)"
         R"("scanned":{"type":"integer","description":"a content search (q): the messages this page read"},)"
         R"("complete":{"type":"boolean","description":"a content search (q): false when the page stopped after reading )" +
         std::to_string(store::kContentScanRows) +
         R"( messages; fewer items than `limit` then says nothing of the rest of the window, and `next` goes on"}}})";
}

std::string messageSchema() {
  return std::string(R"({"type":"object","required":[)") + kMessageRequired +
         R"(,"dedupeKey","lane","tier","bytes","charset"],"properties":{)" +
         messageProperties(true) +
         R"(,"dedupeKey":{"type":["string","null"]},)"
         R"("lane":{"type":"integer"},"tier":{"type":"integer"},"bytes":{"type":"integer"},)"
         R"("charset":{"type":["string","null"]}}})";
}

// The query parameters both lists take; a search across interfaces
// needs one of control_id, key, q.
std::map<std::string, std::string> browseParams() {
  std::string window = std::to_string(kContentWindowHours);
  return {
      {"before", "messages with a smaller id (newest first: the previous page's `next`)"},
      {"after", "messages with a larger id (order=oldest: the previous page's `next`)"},
      {"order", "newest (default) or oldest: by id, oldest first reaches the head of a queue"},
      {"limit", "messages per page: 1-" + std::to_string(kBrowseLimitMax) + " (default " +
                    std::to_string(kBrowseLimitDefault) + ")"},
      {"status",
       "pending, sent, filtered, quarantined, duplicate, or errors (a delivery quarantined, or "
       "pending after a failed try)"},
      {"from", "received at or after this RFC 3339 time"},
      {"to", "received before this RFC 3339 time"},
      {"type",
       "the message type (HL7 MSH-9, components joined by ^): equal, or its first "
       "components (ADT^A01 finds ADT^A01^ADT_A01; ADT finds every ADT)"},
      {"control_id", "the control id (HL7 MSH-10), exactly"},
      {"key", "the ordering key's value (e.g. the patient's MRN), exactly"},
      {"q",
       "text the payload holds (1-" + std::to_string(kContentTextMaxBytes) +
           " bytes, case-sensitive), only with `from` and `to` at most " + window +
           " hours apart; needs the payloads permission and is audited (message.search); a page "
           "reads at most " +
           std::to_string(store::kContentScanRows) + " messages (`scanned`, `complete`)"}};
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

constexpr const char* kProblemsSchema =
    R"j({"type":"array","items":{"type":"object","required":["text"],"properties":{)j"
    R"j("text":{"type":"string","description":"what is wrong, as intake's check says it"},)j"
    R"j("line":{"type":"integer","description":"the line (HL7: the segment) from 1"},)j"
    R"j("column":{"type":"integer","description":"from 1, where the check knows it (JSON)"},)j"
    R"j("segment":{"type":"string","description":"HL7: the segment's name, e.g. MSH"},)j"
    R"j("field":{"type":"string","description":"HL7: the field, e.g. MSH.2"}}}})j";

std::string invalidPayloadSchema() {
  return std::string(
             R"j({"type":"object","required":["error","message"],"properties":{)j"
             R"j("error":{"type":"string","description":"invalid_payload: intake would refuse the payload (its problems say where); invalid: the body itself is wrong"},)j"
             R"j("message":{"type":"string"},)j"
             R"j("format":{"type":"string","description":"invalid_payload: the interface's format"},)j"
             R"j("problems":)j") +
         kProblemsSchema + "}}";
}

constexpr const char* kTryRequest = R"j({"type":"object","required":["payload"],"properties":{
"payload":{"type":"string","minLength":1,"description":"one message as the source would store it"},
"charset":{"enum":["utf-8","iso-8859-1"],"description":"the bytes the functions read; default: the interface's charset (iso-8859-1 when it says so, else utf-8)"}}})j";

std::string tryAnswerSchema() {
  return std::string(
             R"j({"type":"object","required":["interface","check","ran","destinations"],"properties":{)j"
             R"j("interface":{"type":"string"},)j"
             R"j("check":{"type":"object","required":["ok","format","problems"],"description":"the check intake makes (POST /messages/{id}/edit makes it too)","properties":{)j"
             R"j("ok":{"type":"boolean"},"format":{"type":"string"},"message":{"type":"string"},"problems":)j") +
         kProblemsSchema +
         R"j(}},"ran":{"type":"boolean","description":"false: intake would refuse the payload, so no function ran"},)j"
         R"j("destinations":{"type":"array","description":"one per destination, in the interface's order","items":{"type":"object",)j"
         R"j("required":["destination","route","outcome","output","reason","error","runaway","millis"],"properties":{)j"
         R"j("destination":{"type":"string"},)j"
         R"j("route":{"type":"boolean","description":"its output would go into another interface's queue"},)j"
         R"j("outcome":{"enum":["sent","filtered","quarantined","error"],"description":"sent: output is what would be sent; quarantined: the function threw or ran away; error: a transient failure the engine would retry"},)j"
         R"j("output":{"type":["string","null"]},)j"
         R"j("encoding":{"enum":["text","base64"]},"charset":{"type":["string","null"]},)j"
         R"j("reason":{"type":["string","null"],"description":"filtered: the script's reason"},)j"
         R"j("error":{"type":["string","null"]},)j"
         R"j("runaway":{"enum":["timeout","heap",null],"description":"quarantined because the script ran past its timeout or heap; its worker was restarted"},)j"
         R"j("millis":{"type":"integer"}}}}}})j";
}

constexpr const char* kEditAnswer = R"({"type":"object","properties":{
"messageId":{"type":"integer","description":"the copy"},"originId":{"type":"integer"},
"interface":{"type":"string"},"status":{"enum":["pending","filtered"]},
"replaced":{"type":"array","items":{"type":"string"},"description":"the original's quarantined destinations, now filtered"},
"originalStatus":{"type":["string","null"]}}})";

}  // namespace

Result<ListFilters> listFilters(const ApiRequest& req) {
  auto b = browseQuery(req, false);
  if (!b) return b.error();
  return ListFilters{std::move(b->q), std::move(b->text)};
}

nlohmann::json listRowJson(const store::MessageRow& m) { return messageJson(m, false); }

nlohmann::json storedText(std::string_view bytes, const std::optional<std::string>& charset,
                          const char* field) {
  return decoded(bytes, charset, field);
}

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
  routes.push_back(route("GET", "/api/v1/interfaces/{name}/messages", "listMessages",
                         "An interface's messages newest (or oldest) first, paged by id, filtered "
                         "by status, time, type, control id, key or content, with a total",
                         Requirement::toRead(Role::Viewer), bind(listMessages), {}, pageSchema(),
                         browseParams()));
  routes.push_back(route("GET", "/api/v1/messages", "searchMessages",
                         "Messages of every interface by control id, key or content, newest (or "
                         "oldest) first, paged by id, each naming its interface",
                         Requirement::toRead(Role::Viewer), bind(searchMessages), {}, pageSchema(),
                         browseParams()));
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
      "quarantined deliveries as replaced by it; a payload the interface's intake would refuse "
      "is 400 invalid_payload, nothing written",
      Requirement::toChange(Role::Operator), bind(edit), kEditRequest, kEditAnswer);
  editRoute.successStatus = 201;
  editRoute.badRequestSchema = invalidPayloadSchema();
  routes.push_back(std::move(editRoute));
  routes.push_back(route(
      "POST", "/api/v1/interfaces/{name}/try", "tryInterface",
      "A dry run: the payload checked as intake checks it, then each destination's function run "
      "on it in the engine's workers (services mocked); nothing stored or sent (audited)",
      Requirement::toChange(Role::Operator, kPayloads), bind(tryInterface), kTryRequest,
      tryAnswerSchema()));
  return routes;
}

}  // namespace ductus::api
