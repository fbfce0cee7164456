#include "api/message_export.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/audit/audit_log.h"
#include "api/auth/handler_support.h"
#include "api/message_browser.h"
#include "api/message_routes.h"
#include "common/log.h"
#include "common/uv_handle.h"
#include "schema/message_pages.h"
#include "schema/store_types.h"

namespace ductus::api {

std::string csvField(std::string_view text) {
  std::string v;
  // A spreadsheet reads a cell starting so as a formula: senders choose
  // these fields.
  if (!text.empty() && std::string_view("=+-@\t\r").find(text.front()) != std::string_view::npos)
    v = "'";
  v.append(text);
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

using json = nlohmann::json;

// Messages read a page (metadata), and payloads read a statement: a page of
// payloads is at most this many messages' max_message_size in memory.
constexpr int64_t kPageRows = 500;
constexpr size_t kPayloadRows = 25;
// Past this many bytes the client has not taken, the next rows wait (polled
// every kPaceMs): the stream's own bound, 1 MiB, closes it past that.
constexpr size_t kHighWater = 256 * 1024;
constexpr uint64_t kPaceMs = 20;
constexpr size_t kStreamBound = size_t{8} << 20;

enum class Format { Csv, Ndjson };

const char* const kCsvColumns[] = {"id",          "interface",      "received_at",
                                   "status",      "type",           "control_id",
                                   "key",         "last_error",     "origin_id",
                                   "duplicate_of", "edited_from",    "deliveries",
                                   "delivery_errors"};
const char* const kCsvPayloadColumns[] = {"payload_encoding", "charset", "payload"};

std::string optText(const std::optional<std::string>& s) { return s ? *s : std::string(); }
std::string optNumber(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string();
}

std::string csvLine(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    line += csvField(fields[i]);
  }
  return line + "\r\n";
}

std::string csvHead(bool payloads) {
  std::vector<std::string> names(std::begin(kCsvColumns), std::end(kCsvColumns));
  if (payloads) names.insert(names.end(), std::begin(kCsvPayloadColumns), std::end(kCsvPayloadColumns));
  return csvLine(names);
}

// "lab=quarantined/3; ehr=sent/1 (paused)" and "lab: connection refused | ...".
std::pair<std::string, std::string> deliveriesText(const store::MessageRow& m) {
  std::string list, errors;
  for (auto& d : m.deliveries) {
    if (!list.empty()) list += "; ";
    list += d.destination + "=" + std::string(store::statusName(d.status)) + "/" +
            std::to_string(d.attempts) + (d.paused ? " (paused)" : "");
    if (d.lastError) {
      if (!errors.empty()) errors += " | ";
      errors += d.destination + ": " + *d.lastError;
    }
  }
  return {list, errors};
}

std::string rowText(Format format, const store::MessageRow& m, const json* payload) {
  if (format == Format::Ndjson) {
    json o = listRowJson(m);
    if (payload)
      for (auto& [k, v] : payload->items()) o[k] = v;
    return o.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  }
  auto [list, errors] = deliveriesText(m);
  std::vector<std::string> f{std::to_string(m.id),
                             m.interface,
                             m.receivedAt,
                             std::string(store::statusName(m.status)),
                             optText(m.type),
                             optText(m.controlId),
                             optText(m.key),
                             optText(m.lastError),
                             optNumber(m.originId),
                             optNumber(m.duplicateOf),
                             optNumber(m.editedFrom),
                             list,
                             errors};
  if (payload) {
    f.push_back((*payload)["encoding"].get<std::string>());
    f.push_back((*payload)["charset"].is_string() ? (*payload)["charset"].get<std::string>() : "");
    f.push_back((*payload)["payload"].get<std::string>());
  }
  return csvLine(f);
}

// One export under way: the pages read one after another, each written
// once the client has taken most of the last. Held by its callbacks; while
// it waits on its timer, by itself, until the stream ends (onEnded).
class ExportJob : public std::enable_shared_from_this<ExportJob> {
 public:
  ExportJob(MessageDeps& d, std::string interface, store::BrowseQuery q, Format format,
            bool payloads, int64_t rows, std::optional<int64_t> newest)
      : d_(d),
        interface_(std::move(interface)),
        q_(std::move(q)),
        format_(format),
        payloads_(payloads),
        left_(rows) {
    q_.total = false;
    q_.before.reset();
    q_.after.reset();
    // Newest first: below the newest counted, so what arrives meanwhile
    // doesn't push the oldest matches past the count.
    if (q_.order == store::BrowseOrder::NewestFirst && newest) q_.before = *newest + 1;
  }

  void start(net::HttpStream stream) {
    stream_ = std::move(stream);
    if (format_ == Format::Csv) stream_.write(csvHead(payloads_));
    nextPage();
  }

  // The connection has closed: nothing more is written, and the wait (if
  // any) lets go of the job.
  void ended() {
    timer_.reset();
    waiting_.reset();
  }

 private:
  void nextPage() {
    if (!stream_.open()) return ended();
    if (left_ <= 0) return finish();
    store::BrowseQuery q = q_;
    q.limit = std::min(left_, kPageRows);
    auto self = shared_from_this();
    store::messagePage(d_.pool, interface_, std::move(q), [self](Result<store::MessagePage> r) {
      if (!r) return self->fail(r.error());
      self->rows_ = std::move(r->rows);
      self->pos_ = 0;
      self->more_ = r->next.has_value();
      if (r->next) {
        if (self->q_.order == store::BrowseOrder::OldestFirst)
          self->q_.after = *r->next;
        else
          self->q_.before = *r->next;
      }
      self->nextRows();
    });
  }

  // The page's next rows: all of them, or (with payloads) a statement's.
  void nextRows() {
    if (!stream_.open()) return ended();
    if (pos_ >= rows_.size() || left_ <= 0) {
      if (!more_ || left_ <= 0) return finish();
      return nextPage();
    }
    if (!payloads_) {
      std::string text;
      for (; pos_ < rows_.size() && left_ > 0; ++pos_, --left_)
        text += rowText(format_, rows_[pos_], nullptr);
      stream_.write(std::move(text));
      return paced();
    }
    std::vector<int64_t> ids;
    for (size_t i = pos_; i < rows_.size() && ids.size() < kPayloadRows; ++i)
      ids.push_back(rows_[i].id);
    auto self = shared_from_this();
    store::messagePayloads(
        d_.pool, ids, [self, n = ids.size()](Result<std::map<int64_t, store::StoredPayload>> r) {
          if (!r) return self->fail(r.error());
          std::string text;
          for (size_t k = 0; k < n && self->left_ > 0; ++k, ++self->pos_, --self->left_) {
            const auto& m = self->rows_[self->pos_];
            auto it = r->find(m.id);
            // Gone since its row was read (retention): said as no payload.
            json p = it == r->end() ? json{{"encoding", "text"}, {"charset", nullptr}, {"payload", ""}}
                                    : storedText(it->second.bytes, it->second.charset, "payload");
            text += rowText(self->format_, m, &p);
          }
          self->stream_.write(std::move(text));
          self->paced();
        });
  }

  // Goes on once the client has taken most of what was written.
  void paced() {
    if (!stream_.open()) return ended();
    if (stream_.unread() <= kHighWater) return nextRows();
    if (!timer_) timer_ = makeTimer(stream_.loop(), this);
    waiting_ = shared_from_this();
    uv_timer_start(
        timer_.get(),
        [](uv_timer_t* t) {
          auto* job = static_cast<ExportJob*>(t->data);
          if (!job) return;
          auto self = std::move(job->waiting_);
          if (self) self->paced();
        },
        kPaceMs, 0);
  }

  void finish() {
    stream_.end();
    ended();
  }

  // The head went out as 200: a failure can only end the file short of
  // X-Ductus-Export-Rows, and the log says why.
  void fail(const Error& e) {
    spdlog::warn("export of {}'s messages ended early: {}", interface_, e.message);
    finish();
  }

  MessageDeps& d_;
  std::string interface_;
  store::BrowseQuery q_;
  Format format_;
  bool payloads_;
  int64_t left_;
  net::HttpStream stream_;
  std::vector<store::MessageRow> rows_;
  size_t pos_ = 0;
  bool more_ = false;
  UvHandle<uv_timer_t> timer_;
  std::shared_ptr<ExportJob> waiting_;
};

// A name as a file name's part: letters, digits, '.', '-', '_' kept.
std::string fileNamePart(const std::string& s) {
  std::string out;
  for (char c : s)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "interface" : out;
}

void exportMessages(MessageDeps& d, const ApiRequest& req, ApiRespond respond) {
  std::string name = req.params.at("name");
  // The list's own parameters, read by the list's parser; the export's
  // (format, include, limit: rows, not a page) taken out first.
  std::map<std::string, std::string> listQuery = req.query;
  auto take = [&](const char* key) -> std::optional<std::string> {
    auto it = listQuery.find(key);
    if (it == listQuery.end()) return std::nullopt;
    auto v = it->second;
    listQuery.erase(it);
    return v;
  };
  auto formatText = take("format");
  auto include = take("include");
  auto limitText = take("limit");
  Format format = Format::Csv;
  if (formatText && *formatText == "ndjson")
    format = Format::Ndjson;
  else if (formatText && *formatText != "csv")
    return respond(jsonError(400, "invalid", "`format` must be csv or ndjson"));
  bool payloads = false;
  if (include) {
    if (*include != "payload")
      return respond(jsonError(400, "invalid", "`include` must be payload (or left out)"));
    payloads = true;
  }
  int64_t limit = kExportRowsMax;
  if (limitText) {
    auto v = positiveId(*limitText);
    if (!v || *v > kExportRowsMax)
      return respond(jsonError(400, "invalid",
                               "`limit` must be 1 to " + std::to_string(kExportRowsMax) +
                                   " messages (default " + std::to_string(kExportRowsMax) + ")"));
    limit = *v;
  }
  ApiRequest listReq{req.http, req.params, std::move(listQuery), req.caller};
  auto filters = listFilters(listReq);
  if (!filters) return respond(errorResponse(filters.error()));
  if (payloads && !(req.caller->permissions & kPayloads))
    return respond(
        jsonError(403, "forbidden", "an export with payloads needs the payloads permission"));
  auto q = std::move(filters->q);
  const Caller caller = *req.caller;
  store::exportScope(
      d.pool, name, q, limit,
      [&d, name, q, format, payloads, limit, caller, respond](Result<store::ExportScope> r) {
        if (!r) return respond(errorResponse(r.error()));
        auto scope = *r;
        auto go = [&d, name, q, format, payloads, scope, respond] {
          std::string type = format == Format::Csv ? "text/csv; charset=utf-8"
                                                   : "application/x-ndjson; charset=utf-8";
          std::string file = fileNamePart(name) + "-messages." +
                             (format == Format::Csv ? "csv" : "ndjson");
          auto job = std::make_shared<ExportJob>(d, name, q, format, payloads, scope.count,
                                                 scope.newest);
          std::weak_ptr<ExportJob> weak = job;
          net::HttpStreamOptions options;
          options.maxUnread = kStreamBound;
          options.onEnded = [weak] {
            if (auto j = weak.lock()) j->ended();
          };
          auto stream = respond.stream(
              net::HttpResponse{200,
                                {{"Content-Type", type},
                                 {"Content-Disposition", "attachment; filename=\"" + file + "\""},
                                 {"Cache-Control", "no-store"},
                                 {"X-Ductus-Export-Rows", std::to_string(scope.count)},
                                 {"X-Ductus-Export-Complete", scope.more ? "false" : "true"}},
                                {}},
              std::move(options));
          if (!stream.open()) return;  // a HEAD, a closing server, a client gone
          job->start(std::move(stream));
        };
        if (!payloads) return go();
        // Payloads leave only once the export is on record.
        auto entry = auditEntryFor(caller, "message.export");
        entry.targetKind = "interface";
        entry.targetName = name;
        json given = json::array();
        for (auto [key, set] : {std::pair{"control_id", q.controlId.has_value()},
                                std::pair{"key", q.key.has_value()}})
          if (set) given.push_back(key);
        entry.detail = {
            {"format", format == Format::Csv ? "csv" : "ndjson"},
            {"include", "payload"},
            {"filter",
             {{"order", q.order == store::BrowseOrder::OldestFirst ? "oldest" : "newest"},
              {"status", q.errors   ? json("errors")
                         : q.status ? json(store::statusName(*q.status))
                                    : json()},
              {"from", orNull(q.from)},
              {"to", orNull(q.to)},
              {"type", orNull(q.type)},
              {"given", std::move(given)}}},
            {"count", scope.count},
            {"complete", !scope.more},
            {"limit", limit}};
        d.audit.write(entry, [go, respond](Status s) {
          if (!s.ok()) {
            auto e = jsonError(503, "unavailable",
                               s.error().message + " (no export of payloads without its audit row)");
            e.headers.emplace_back("Retry-After", "1");
            return respond(e);
          }
          go();
        });
      });
}

}  // namespace

std::vector<Route> messageExportRoutes(AuthDeps* auth, EngineView* engine) {
  std::shared_ptr<MessageDeps> d;
  if (auth) d = std::make_shared<MessageDeps>(MessageDeps{*auth, engine, auth->pool, auth->audit});
  Route r;
  r.method = "GET";
  r.path = "/api/v1/interfaces/{name}/messages/export";
  r.operationId = "exportMessages";
  r.summary =
      "An interface's messages the list's filters match, as CSV (or NDJSON), streamed; at most "
      "100,000; payloads with include=payload (payloads permission, audited)";
  r.tag = "messages";
  r.requirement = Requirement::toRead(Role::Viewer);
  r.handler = bindHandler(d, exportMessages, "no message store behind this API");
  r.responseContentType = "text/csv";
  r.responseSchema = R"({"type":"string","description":"CSV: a header line (id, interface, received_at, status, type, control_id, key, last_error, origin_id, duplicate_of, edited_from, deliveries, delivery_errors; with payloads also payload_encoding, charset, payload), then a line per message, CRLF, RFC 4180 quoting. NDJSON (format=ndjson, application/x-ndjson): a list row's JSON per line, with encoding, charset and payload when included. X-Ductus-Export-Rows: the messages that follow; X-Ductus-Export-Complete: false when more matched than the limit."})";
  r.queryParams = {
      {"format", "csv (default) or ndjson"},
      {"include", "payload: each message's payload too (needs the payloads permission; audited "
                  "as message.export)"},
      {"limit", "the most messages: 1-" + std::to_string(kExportRowsMax) + " (default " +
                    std::to_string(kExportRowsMax) + ")"},
      {"order", "newest (default) or oldest"},
      {"status", "as the list: pending, sent, filtered, quarantined, duplicate or errors"},
      {"from", "received at or after this RFC 3339 time"},
      {"to", "received before this RFC 3339 time"},
      {"type", "the message type, as the list takes it"},
      {"control_id", "the control id (HL7 MSH-10), exactly"},
      {"key", "the ordering key's value, exactly"}};
  return {std::move(r)};
}

}  // namespace ductus::api
