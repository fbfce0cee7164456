// HttpSender: the HTTP client of an HTTP destination. Every request runs
// as a transfer on a shared CurlMulti (libcurl's multi-socket API on the
// supervisor's loop), so a slow receiver holds no thread and never the
// loop. The response decides the outcome:
//   2xx                                 -> Sent
//   408, 429, 5xx, network errors,
//   timeouts                            -> Transient
//   other 4xx, 3xx (never followed)     -> Permanent, "HTTP 404 Not Found: <body>"
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/net/curl_easy.h"
#include "common/net/curl_multi_uv.h"
#include "supervisor/delivery/senders/sender.h"

namespace ductus::senders {

struct HttpSenderSettings {
  std::string url;  // http:// or https:// only
  std::string method = "POST";
  std::vector<std::pair<std::string, std::string>> headers;
  // The whole exchange, connect to last byte of the response.
  std::chrono::milliseconds timeout{30'000};
  std::chrono::milliseconds connectTimeout{10'000};
  // https with a ConnectTls: the CA named besides the system's roots, and
  // the client certificate. Null: libcurl's defaults (the system's roots).
  std::shared_ptr<const net::CurlTls> tls;
};

// Maps a final HTTP status to an outcome; `reason` and the first bytes of
// `body` go into the detail.
SendOutcome outcomeOfHttpStatus(long status, std::string_view reason, std::string_view body);

class HttpSender final : public Sender {
 public:
  // `multi` must outlive the sender; many senders may share one.
  HttpSender(net::CurlMulti& multi, HttpSenderSettings settings);
  // Abandons transfers still running without calling their callbacks.
  ~HttpSender() override;
  HttpSender(const HttpSender&) = delete;
  HttpSender& operator=(const HttpSender&) = delete;

  // Requests run concurrently; the caller orders them if it needs to.
  // request.method and request.headers override the destination's.
  void send(SendRequest request, SendCallback cb) override;
  // Transfers still running are stopped and answer Transient "sender closed".
  void close(std::function<void()> done) override;

  size_t inFlight() const { return transfers_.size(); }

 private:
  struct Transfer;
  void finish(CURL* easy, CURLcode code);
  void answerLater(SendCallback cb, SendOutcome outcome);

  net::CurlMulti& multi_;
  HttpSenderSettings settings_;
  std::map<CURL*, std::unique_ptr<Transfer>> transfers_;
  bool closed_ = false;
};

}  // namespace ductus::senders
