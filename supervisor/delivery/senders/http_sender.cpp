#include "supervisor/delivery/senders/http_sender.h"

#include <algorithm>
#include <cctype>

#include "common/http_syntax.h"
#include "common/net/curl_easy.h"
#include "common/net/loop_post.h"
#include "common/text.h"

namespace ductus::senders {
namespace {

// How much of a response body goes into last_error.
constexpr size_t kBodyExcerpt = 200;

std::string printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
  return out;
}

}  // namespace

SendOutcome outcomeOfHttpStatus(long status, std::string_view reason, std::string_view body) {
  std::string detail = "HTTP " + std::to_string(status);
  if (!reason.empty()) detail += " " + printable(reason);
  if (status >= 200 && status < 300) return SendOutcome::sent(std::move(detail));
  if (!body.empty()) detail += ": " + printable(body.substr(0, kBodyExcerpt));
  if (status == 408 || status == 429 || (status >= 500 && status < 600)) {
    return SendOutcome::transient(std::move(detail));
  }
  if (status >= 300 && status < 500) return SendOutcome::permanent(std::move(detail));
  // 1xx as a final answer or a number outside HTTP: not the receiver's
  // verdict on the message, so try again.
  return SendOutcome::transient(std::move(detail));
}

struct HttpSender::Transfer {
  net::CurlEasy easy;
  net::CurlSlist headers;
  std::string method;
  std::string body;      // libcurl reads it in place (CURLOPT_POSTFIELDS)
  std::string response;  // the first kBodyExcerpt bytes
  std::string reason;    // of the last status line (after any 100 Continue)
  char error[CURL_ERROR_SIZE] = {};
  SendCallback cb;

  static size_t onBody(char* data, size_t size, size_t n, void* userp) {
    auto* t = static_cast<Transfer*>(userp);
    size_t len = size * n;
    if (t->response.size() < kBodyExcerpt) {
      t->response.append(data, std::min(len, kBodyExcerpt - t->response.size()));
    }
    return len;  // the rest is read and dropped
  }
  static size_t onHeader(char* data, size_t size, size_t n, void* userp) {
    auto* t = static_cast<Transfer*>(userp);
    std::string_view line(data, size * n);
    if (auto r = net::statusLineReason(line)) t->reason = std::string(*r);
    return size * n;
  }
};

HttpSender::HttpSender(net::CurlMulti& multi, HttpSenderSettings settings)
    : multi_(multi), settings_(std::move(settings)) {}

HttpSender::~HttpSender() {
  for (auto& [easy, t] : transfers_) multi_.cancel(easy);
}

void HttpSender::answerLater(SendCallback cb, SendOutcome outcome) {
  net::postToLoop(multi_.loop(),
                  [cb = std::move(cb), o = std::move(outcome)]() mutable { cb(std::move(o)); });
}

void HttpSender::send(SendRequest request, SendCallback cb) {
  if (closed_) {
    answerLater(std::move(cb), SendOutcome::transient("sender closed"));
    return;
  }
  auto t = std::make_unique<Transfer>();
  t->method = request.method.value_or(settings_.method);
  std::transform(t->method.begin(), t->method.end(), t->method.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  if (!isHttpToken(t->method)) {
    answerLater(std::move(cb),
                SendOutcome::permanent("invalid HTTP method \"" + printable(t->method) + "\""));
    return;
  }
  // The destination's headers, each replaced by the message's header of
  // the same name, then the message's others.
  std::vector<std::pair<std::string, std::string>> headers;
  for (auto& h : settings_.headers) {
    bool overridden = std::any_of(request.headers.begin(), request.headers.end(),
                                  [&](auto& m) { return asciiLower(m.first) == asciiLower(h.first); });
    if (!overridden) headers.push_back(h);
  }
  for (auto& h : request.headers) headers.push_back(h);
  bool hasContentType = false;
  curl_slist* list = nullptr;
  for (auto& [name, value] : headers) {
    if (!isHttpToken(name) || !isHttpHeaderValue(value)) {
      curl_slist_free_all(list);
      answerLater(std::move(cb),
                  SendOutcome::permanent("invalid HTTP header \"" + printable(name) + "\""));
      return;
    }
    hasContentType = hasContentType || asciiLower(name) == "content-type";
    list = curl_slist_append(list, (name + ": " + value).c_str());
  }
  // libcurl would label a body application/x-www-form-urlencoded.
  if (!hasContentType) list = curl_slist_append(list, "Content-Type: application/octet-stream");
  // No "Expect: 100-continue" round trip (a full second with servers that
  // ignore it) before bodies over 1 MB.
  list = curl_slist_append(list, "Expect:");
  t->headers.reset(list);

  t->easy.reset(curl_easy_init());
  CURL* e = t->easy.get();
  t->body = std::move(request.payload);
  t->cb = std::move(cb);
  curl_easy_setopt(e, CURLOPT_URL, settings_.url.c_str());
  net::setRequestOptions(e, settings_.timeout, t->headers.get(), t->error, &Transfer::onBody,
                         &Transfer::onHeader, t.get());
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(settings_.connectTimeout.count()));
  if (settings_.tls) settings_.tls->apply(e);
  // A destination's GET sends no body, whatever the transform returned.
  net::setMethodAndBody(e, t->method, t->method == "GET" ? nullptr : &t->body);
  transfers_.emplace(e, std::move(t));
  multi_.add(e, [this, e](CURLcode code) { finish(e, code); });
}

void HttpSender::finish(CURL* easy, CURLcode code) {
  auto it = transfers_.find(easy);
  if (it == transfers_.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  transfers_.erase(it);
  SendOutcome outcome;
  if (code != CURLE_OK) {
    // Nothing final came back: the receiver is down, slow or unreachable.
    outcome = SendOutcome::transient(t->method + " " + settings_.url + ": " +
                                     (t->error[0] ? t->error : curl_easy_strerror(code)));
  } else {
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    outcome = outcomeOfHttpStatus(status, t->reason, t->response);
  }
  SendCallback cb = std::move(t->cb);
  t.reset();
  cb(std::move(outcome));  // last: it may destroy this sender
}

void HttpSender::close(std::function<void()> done) {
  closed_ = true;
  uv_loop_t* loop = multi_.loop();
  auto running = std::move(transfers_);
  transfers_.clear();
  for (auto& [easy, t] : running) multi_.cancel(easy);
  for (auto& [easy, t] : running) t->cb(SendOutcome::transient("sender closed"));
  if (done) net::postToLoop(loop, std::move(done));
}

}  // namespace ductus::senders
