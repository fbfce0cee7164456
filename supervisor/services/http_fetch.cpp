#include "supervisor/services/http_fetch.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/http_syntax.h"
#include "common/text.h"
#include "proto/contract.h"
#include "supervisor/delivery/senders/curl_easy.h"
#include "supervisor/delivery/senders/curl_multi_uv.h"

namespace ductus::supervisor::services {
namespace {


// Appended to an error's text: the failure is transient (the message waits).
const std::string kTransient = " " + std::string(proto::transientMarker());

// One part of a parsed URL, or nullopt when the URL has none.
std::optional<std::string> urlPart(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* text = nullptr;
  if (curl_url_get(u, part, &text, flags) != CURLUE_OK || !text) return std::nullopt;
  std::string out(text);
  curl_free(text);
  return out;
}

}  // namespace

Result<ParsedUrl> parseHttpUrl(const std::string& url) {
  ParsedUrl p;
  p.handle.reset(curl_url());
  if (!p.handle) return Error{"out of memory parsing a URL"};
  if (CURLUcode rc = curl_url_set(p.handle.get(), CURLUPART_URL, url.c_str(), 0); rc != CURLUE_OK)
    return Error{std::string("not a URL (") + curl_url_strerror(rc) + ")"};
  auto scheme = urlPart(p.handle.get(), CURLUPART_SCHEME);
  if (!scheme || (asciiLower(*scheme) != "http" && asciiLower(*scheme) != "https"))
    return Error{"not an http:// or https:// URL"};
  auto host = urlPart(p.handle.get(), CURLUPART_HOST);
  auto port = urlPart(p.handle.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (!host || host->empty() || !port) return Error{"not a URL with a host"};
  *scheme = asciiLower(*scheme);
  *host = asciiLower(*host);
  p.origin = *scheme + "://" + *host + ":" + *port;
  p.path = urlPart(p.handle.get(), CURLUPART_PATH).value_or("/");
  if (p.path.empty()) p.path = "/";
  p.shown = *scheme + "://" + *host;
  if (auto explicitPort = urlPart(p.handle.get(), CURLUPART_PORT)) p.shown += ":" + *explicitPort;
  p.shown += p.path;
  return p;
}

Status checkMethod(const std::string& method) {
  if (!isHttpToken(method)) return Error{"\"" + method + "\" is not an HTTP method"};
  if (method == "CONNECT" || method == "TRACE")
    return Error{method + " is not a method scripts may send"};
  return {};
}

Status checkHeader(const std::string& name, const std::string& value) {
  if (auto refused = scriptHeaderRefusal(name, value)) return Error{*refused};
  return {};
}

std::string answerJson(const HttpAnswer& answer) {
  nlohmann::json headers = nlohmann::json::object();
  for (auto& [k, v] : answer.headers) headers[asText(k)] = asText(v);
  nlohmann::json j{{"status", answer.status}, {"headers", std::move(headers)},
                   {"body", asText(answer.body)}};
  return j.dump();
}

struct HttpFetch::Transfer {
  senders::CurlEasy easy;
  senders::CurlSlist headers;
  HttpCall call;  // its URL handle and body are read by libcurl in place
  HttpAnswer answer;
  size_t limit = 0;
  size_t received = 0;  // header and body bytes, against `limit`
  bool tooLarge = false;
  char error[CURL_ERROR_SIZE] = {};
  std::function<void(Result<HttpAnswer>)> done;

  bool take(size_t len) {
    received += len;
    if (received > limit) tooLarge = true;
    return !tooLarge;
  }

  static size_t onBody(char* data, size_t size, size_t n, void* userp) {
    auto* t = static_cast<Transfer*>(userp);
    size_t len = size * n;
    if (!t->take(len)) return 0;  // anything but len aborts: CURLE_WRITE_ERROR
    t->answer.body.append(data, len);
    return len;
  }

  static size_t onHeader(char* data, size_t size, size_t n, void* userp) {
    auto* t = static_cast<Transfer*>(userp);
    size_t len = size * n;
    if (!t->take(len)) return 0;
    std::string_view line(data, len);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
    if (line.substr(0, 5) == "HTTP/") {
      // A new status line (after a 100 Continue): only the final
      // response's headers are the answer's.
      t->answer.headers.clear();
      return len;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return len;
    std::string name = asciiLower(line.substr(0, colon));
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    auto [it, fresh] = t->answer.headers.emplace(name, std::string(value));
    if (!fresh) it->second += ", " + std::string(value);
    return len;
  }
};

HttpFetch::HttpFetch(uv_loop_t* loop, size_t maxResponseBytes)
    : loop_(loop), maxResponseBytes_(maxResponseBytes) {}

HttpFetch::~HttpFetch() {
  // Out of the multi before the easy handles are cleaned up.
  if (multi_)
    for (auto& [easy, t] : transfers_) multi_->cancel(easy);
  transfers_.clear();
  multi_.reset();
}

void HttpFetch::start(HttpCall call, std::function<void(Result<HttpAnswer>)> done) {
  if (!multi_) multi_ = std::make_unique<senders::CurlMulti>(loop_);
  auto t = std::make_unique<Transfer>();
  t->call = std::move(call);
  t->limit = maxResponseBytes_;
  t->done = std::move(done);
  const HttpCall& c = t->call;

  curl_slist* list = nullptr;
  for (auto& [name, value] : c.headers) list = curl_slist_append(list, (name + ": " + value).c_str());
  // No "Expect: 100-continue" round trip before large bodies (a whole
  // second with servers that ignore it).
  list = curl_slist_append(list, "Expect:");
  t->headers.reset(list);

  t->easy.reset(curl_easy_init());
  CURL* e = t->easy.get();
  curl_easy_setopt(e, CURLOPT_CURLU, c.url.handle.get());
  senders::setRequestOptions(e, c.timeout, t->headers.get(), t->error, &Transfer::onBody,
                             &Transfer::onHeader, t.get());
  senders::setMethodAndBody(e, c.method, c.body ? &*c.body : nullptr);
  transfers_.emplace(e, std::move(t));
  multi_->add(e, [this, e](CURLcode code) { finish(e, code); });
}

void HttpFetch::finish(CURL* easy, CURLcode code) {
  auto it = transfers_.find(easy);
  if (it == transfers_.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  transfers_.erase(it);
  Result<HttpAnswer> out = Error{""};
  const std::string& label = t->call.label;
  if (t->tooLarge) {
    // Not transient: the same request would bring the same body again.
    out = Error{label + ": the response is larger than " + std::to_string(t->limit) +
                " bytes, the most a script may receive"};
  } else if (code == CURLE_OK) {
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &t->answer.status);
    out = std::move(t->answer);
  } else if (code == CURLE_OPERATION_TIMEDOUT) {
    out = Error{label + ": no response within " + std::to_string(t->call.timeout.count()) + " ms" +
                kTransient};
  } else {
    // Nothing final came back (refused, reset, DNS, TLS): the server may
    // be back later, so the message waits.
    out = Error{label + ": " + (t->error[0] ? t->error : curl_easy_strerror(code)) + kTransient};
  }
  auto done = std::move(t->done);
  t.reset();
  done(std::move(out));  // last: it may destroy this object
}

}  // namespace ductus::supervisor::services
