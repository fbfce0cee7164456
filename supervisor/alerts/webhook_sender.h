// WebhookSender: an alert's webhook POST (and the heartbeat's GET) through
// libcurl on the supervisor's loop (net::CurlMulti). A 2xx answer is
// sent; anything else is an error with the status and the start of the
// answer. https is verified against the system's roots (or the CurlTls
// given); no redirects (net::setRequestOptions refuses them: a 3xx is an
// answer). Errors show the URL's origin only: a webhook's or a ping's path
// and query usually carry its token.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <curl/curl.h>

#include "common/result.h"

namespace ductus::net {
class CurlMulti;
class CurlTls;
}  // namespace ductus::net

namespace ductus::supervisor::alerts {

// "https://chat.example:443" of an http(s) URL, or an error saying what
// is wrong with it (never showing it whole).
Result<std::string> webhookOrigin(const std::string& url);

class WebhookSender {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{15000};
  // How much of a refusing answer goes into the error.
  static constexpr size_t kAnswerExcerpt = 200;

  explicit WebhookSender(net::CurlMulti& multi, std::shared_ptr<const net::CurlTls> tls = nullptr,
                         std::chrono::milliseconds timeout = kDefaultTimeout);
  // Abandons requests still running: their callbacks are not called.
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  // POSTs `body` as `contentType` ("" : application/json). `done` runs
  // once, on the loop, never inside post().
  void post(const std::string& url, std::string body, std::string contentType,
            std::function<void(Status)> done);
  // GETs the URL (the heartbeat). Same answers as post().
  void get(const std::string& url, std::function<void(Status)> done);
  size_t running() const { return transfers_.size(); }

 private:
  struct Transfer;
  void start(const std::string& method, const std::string& url, std::string body,
             std::string contentType, std::function<void(Status)> done);
  void finish(CURL* easy, CURLcode code);

  net::CurlMulti& multi_;
  std::shared_ptr<const net::CurlTls> tls_;
  std::chrono::milliseconds timeout_;
  std::map<CURL*, std::unique_ptr<Transfer>> transfers_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor::alerts
