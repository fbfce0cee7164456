#include "supervisor/alerts/webhook_sender.h"

#include <algorithm>

#include "common/http_syntax.h"
#include "common/net/curl_easy.h"
#include "common/net/curl_multi_uv.h"
#include "common/net/loop_post.h"
#include "supervisor/services/http_fetch.h"

namespace ductus::supervisor::alerts {
namespace {

std::string printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
  return out;
}

}  // namespace

Result<std::string> webhookOrigin(const std::string& url) {
  auto parsed = services::parseHttpUrl(url);
  if (!parsed) return Error{"webhook: " + parsed.error().message, ErrorKind::Invalid};
  return parsed->origin;
}

struct WebhookSender::Transfer {
  net::CurlEasy easy;
  net::CurlSlist headers;
  services::ParsedUrl url;  // libcurl reads its handle in place
  std::string label;        // "webhook POST https://host:443"
  std::string body;         // read in place (CURLOPT_POSTFIELDS)
  std::string answer;       // the first kAnswerExcerpt bytes
  std::string reason;       // of the last status line
  char error[CURL_ERROR_SIZE] = {};
  std::function<void(Status)> done;

  static size_t onBody(char* data, size_t size, size_t n, void* userp) {
    auto* t = static_cast<Transfer*>(userp);
    size_t len = size * n;
    if (t->answer.size() < kAnswerExcerpt)
      t->answer.append(data, std::min(len, kAnswerExcerpt - t->answer.size()));
    return len;  // the rest is read and dropped
  }
  static size_t onHeader(char* data, size_t size, size_t n, void* userp) {
    auto* t = static_cast<Transfer*>(userp);
    std::string_view line(data, size * n);
    if (auto r = net::statusLineReason(line)) t->reason = printable(*r);
    return size * n;
  }
};

WebhookSender::WebhookSender(net::CurlMulti& multi, std::shared_ptr<const net::CurlTls> tls,
                             std::chrono::milliseconds timeout)
    : multi_(multi), tls_(std::move(tls)), timeout_(timeout) {}

WebhookSender::~WebhookSender() {
  *alive_ = false;
  for (auto& [easy, t] : transfers_) multi_.cancel(easy);
}

void WebhookSender::post(const std::string& url, std::string body, std::string contentType,
                         std::function<void(Status)> done) {
  start("POST", url, std::move(body), std::move(contentType), std::move(done));
}

void WebhookSender::get(const std::string& url, std::function<void(Status)> done) {
  start("GET", url, {}, {}, std::move(done));
}

void WebhookSender::start(const std::string& method, const std::string& url, std::string body,
                          std::string contentType, std::function<void(Status)> done) {
  auto refuse = [&](Error e) {
    net::postToLoop(multi_.loop(), [alive = alive_, done = std::move(done),
                                    e = std::move(e)]() mutable {
      if (*alive) done(std::move(e));
    });
  };
  auto parsed = services::parseHttpUrl(url);
  if (!parsed)
    return refuse(Error{"webhook " + method + ": " + parsed.error().message, ErrorKind::Invalid});
  if (contentType.empty()) contentType = "application/json";
  if (!isHttpHeaderValue(contentType))
    return refuse(Error{"webhook " + method + ": the content type has line breaks",
                        ErrorKind::Invalid});

  auto t = std::make_unique<Transfer>();
  t->label = "webhook " + method + " " + parsed->origin;
  t->url = std::move(*parsed);
  t->body = std::move(body);
  t->done = std::move(done);
  curl_slist* list = nullptr;
  if (method != "GET") list = curl_slist_append(list, ("Content-Type: " + contentType).c_str());
  list = curl_slist_append(list, "Expect:");
  t->headers.reset(list);

  t->easy.reset(curl_easy_init());
  CURL* e = t->easy.get();
  curl_easy_setopt(e, CURLOPT_CURLU, t->url.handle.get());
  net::setRequestOptions(e, timeout_, t->headers.get(), t->error, &Transfer::onBody,
                         &Transfer::onHeader, t.get());
  net::setMethodAndBody(e, method, method == "GET" ? nullptr : &t->body);
  if (tls_) tls_->apply(e);
  transfers_.emplace(e, std::move(t));
  multi_.add(e, [this, e](CURLcode code) { finish(e, code); });
}

void WebhookSender::finish(CURL* easy, CURLcode code) {
  auto it = transfers_.find(easy);
  if (it == transfers_.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  transfers_.erase(it);
  Status out;
  if (code == CURLE_OPERATION_TIMEDOUT) {
    out = Error{t->label + ": no answer within " + std::to_string(timeout_.count()) + " ms",
                ErrorKind::Unavailable};
  } else if (code != CURLE_OK) {
    out = Error{t->label + ": " + (t->error[0] ? t->error : curl_easy_strerror(code)),
                ErrorKind::Unavailable};
  } else {
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status > 299) {
      std::string detail = t->label + ": HTTP " + std::to_string(status);
      if (!t->reason.empty()) detail += " " + t->reason;
      if (!t->answer.empty()) detail += ": " + printable(t->answer);
      out = Error{detail, ErrorKind::Unavailable};
    }
  }
  auto done = std::move(t->done);
  t.reset();
  done(std::move(out));  // last: it may destroy this sender
}

}  // namespace ductus::supervisor::alerts
