#include "supervisor/services/http_fetch.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/http_syntax.h"
#include "common/net/curl_easy.h"
#include "common/net/curl_multi_uv.h"
#include "common/text.h"
#include "proto/contract.h"

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
  net::CurlEasy easy;
  net::CurlSlist headers;
  HttpCall call;  // its URL handle and body are read by libcurl in place
  HttpAnswer answer;
  size_t limit = 0;
  std::chrono::milliseconds shownTimeout{0};  // as the script or api gave it
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

HttpFetch::HttpFetch(uv_loop_t* loop, size_t maxResponseBytes, size_t maxRunning, size_t maxQueued)
    : loop_(loop),
      maxResponseBytes_(maxResponseBytes),
      maxRunning_(maxRunning == 0 ? 1 : maxRunning),
      maxQueued_(maxQueued) {}

HttpFetch::~HttpFetch() {
  *alive_ = false;
  // Out of the multi before the easy handles are cleaned up.
  if (multi_)
    for (auto& [easy, t] : transfers_) multi_->cancel(easy);
  transfers_.clear();
  multi_.reset();
}

void HttpFetch::start(HttpCall call, Done done) {
  if (transfers_.size() < maxRunning_ && queue_.empty()) {
    auto shown = call.timeout;
    return begin(std::move(call), std::move(done), shown);
  }
  if (queue_.size() >= maxQueued_) {
    std::string label = call.label;
    return answerSoon(std::move(done),
                      Error{label + ": refused, " + std::to_string(queue_.size()) +
                            " calls already wait for one of the " + std::to_string(maxRunning_) +
                            " requests scripts may have in flight at once" + kTransient});
  }
  auto now = Clock::now();
  auto deadline = now + call.timeout;
  queue_.push_back(Waiting{std::move(call), std::move(done), now, deadline});
  armQueueTimer();
}

void HttpFetch::pump() {
  auto now = Clock::now();
  while (!queue_.empty() && transfers_.size() < maxRunning_) {
    Waiting w = std::move(queue_.front());
    queue_.pop_front();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(w.deadline - now);
    if (left.count() <= 0) {
      answerSoon(
          std::move(w.done),
          Error{w.call.label + ": no response within " + std::to_string(w.call.timeout.count()) +
                " ms (it waited for one of the " + std::to_string(maxRunning_) +
                " requests in flight the whole time)" + kTransient});
      continue;
    }
    // The wait counts against the call's timeout; errors still name the
    // timeout the script or the api gave.
    auto shown = w.call.timeout;
    w.call.timeout = left;
    begin(std::move(w.call), std::move(w.done), shown);
  }
  armQueueTimer();
}

void HttpFetch::armQueueTimer() {
  if (queue_.empty()) {
    if (queueTimer_) uv_timer_stop(queueTimer_.get());
    return;
  }
  auto first = queue_.front().deadline;
  for (auto& w : queue_) first = std::min(first, w.deadline);
  auto in = std::chrono::duration_cast<std::chrono::milliseconds>(first - Clock::now()).count();
  if (!queueTimer_) queueTimer_ = makeTimer(loop_, this);
  uv_timer_start(queueTimer_.get(), &HttpFetch::onQueueTimer,
                 static_cast<uint64_t>(std::max<int64_t>(in, 0) + 1), 0);
}

void HttpFetch::onQueueTimer(uv_timer_t* t) {
  auto* self = static_cast<HttpFetch*>(t->data);
  if (!self) return;
  auto now = Clock::now();
  for (auto it = self->queue_.begin(); it != self->queue_.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    self->answerSoon(
        std::move(it->done),
        Error{it->call.label + ": no response within " + std::to_string(it->call.timeout.count()) +
              " ms (it waited for one of the " + std::to_string(self->maxRunning_) +
              " requests in flight the whole time)" + kTransient});
    it = self->queue_.erase(it);
  }
  self->armQueueTimer();
}

void HttpFetch::answerSoon(Done done, Error error) {
  answers_.emplace_back(std::move(done), std::move(error));
  if (!answerTimer_) answerTimer_ = makeTimer(loop_, this);
  uv_timer_start(answerTimer_.get(), &HttpFetch::onAnswerSoon, 0, 0);
}

void HttpFetch::onAnswerSoon(uv_timer_t* t) {
  auto* self = static_cast<HttpFetch*>(t->data);
  if (!self) return;
  auto answers = std::move(self->answers_);
  self->answers_.clear();
  // An answer may destroy this object; the rest are then abandoned, as the
  // destructor abandons every call.
  auto alive = self->alive_;
  for (auto& [done, error] : answers) {
    if (!*alive) break;
    done(std::move(error));
  }
}

void HttpFetch::begin(HttpCall call, Done done, std::chrono::milliseconds shownTimeout) {
  if (!multi_) multi_ = std::make_unique<net::CurlMulti>(loop_);
  auto t = std::make_unique<Transfer>();
  t->call = std::move(call);
  t->limit = maxResponseBytes_;
  t->shownTimeout = shownTimeout;
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
  net::setRequestOptions(e, c.timeout, t->headers.get(), t->error, &Transfer::onBody,
                         &Transfer::onHeader, t.get());
  net::setMethodAndBody(e, c.method, c.body ? &*c.body : nullptr);
  if (c.tls) c.tls->apply(e);
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
    out = Error{label + ": no response within " + std::to_string(t->shownTimeout.count()) + " ms" +
                kTransient};
  } else {
    // Nothing final came back (refused, reset, DNS, TLS): the server may
    // be back later, so the message waits.
    out = Error{label + ": " + (t->error[0] ? t->error : curl_easy_strerror(code)) + kTransient};
  }
  auto done = std::move(t->done);
  t.reset();
  pump();                // a slot is free: the next waiting call takes it
  done(std::move(out));  // last: it may destroy this object
}

}  // namespace ductus::supervisor::services
