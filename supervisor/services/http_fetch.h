// HttpFetch: the HTTP half of the script services (fetch() and api(name)).
// One request at a time per call, any number at once, through libcurl's
// multi-socket API on the supervisor's loop (net::CurlMulti), so a slow
// server never blocks the loop. It knows nothing of resources.yaml: the
// caller (ProjectServices) decides which URLs a script may reach and passes
// a URL it has already checked, as a parsed CURLU handle, so the URL libcurl
// connects to is exactly the one whose origin was checked.
//
// Every final status is a response (the SDK decides which ones are
// transient: 5xx/408/429 unless retry: false); only failures to get one
// (refused, reset, DNS, TLS, timeout) are errors, and they carry the
// "[ductus:transient]" marker so the message waits and is retried. A body
// past the size limit is a permanent error: retrying would fetch it again.
//
// At most maxRunning requests are in flight at once (default 16 for the
// whole engine): scripts in a loop over fetch() would otherwise open a
// connection per call to a server that is already slow, and spend the
// supervisor's descriptors. Later calls wait in a queue, in order; the time
// waited counts against the call's timeout, and a call whose timeout runs
// out while it waits, or that finds maxQueued calls already waiting, is
// answered transient (the message waits and is retried).
#pragma once

#include <curl/curl.h>
#include <uv.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/uv_handle.h"

namespace ductus::net {
class CurlMulti;
class CurlTls;
}

namespace ductus::supervisor::services {

struct CurlUrlFree {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
using CurlUrl = std::unique_ptr<CURLU, CurlUrlFree>;

// An http(s) URL, parsed once. origin is "scheme://host:port" with the
// scheme and host lower-cased and the default port filled in, so two
// spellings of one server compare equal; shown is the URL without its
// user, password, query and fragment, for messages and logs (a query often
// carries a token, so a URL's query is never shown).
struct ParsedUrl {
  CurlUrl handle;
  std::string origin;
  std::string shown;
  std::string path;  // as written, "/" when empty
};
Result<ParsedUrl> parseHttpUrl(const std::string& url);

struct HttpCall {
  std::string method = "GET";  // an HTTP token, upper-cased by the caller
  ParsedUrl url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> body;
  std::chrono::milliseconds timeout{30000};
  // What the errors call this request, e.g. `fetch GET http://h/p` or
  // `api("lab") GET /orders`.
  std::string label;
  // The api's ca:/certificate: (null: libcurl's defaults, the system's roots).
  std::shared_ptr<const net::CurlTls> tls;
};

struct HttpAnswer {
  long status = 0;
  // Names lower-cased (as fetch's Headers does); repeated ones joined by ", ".
  std::map<std::string, std::string> headers;
  std::string body;
};

class HttpFetch {
 public:
  // The default response limit, 16 MB: generous for an API's answer, and
  // a runaway download cannot fill the supervisor's memory.
  static constexpr size_t kDefaultMaxResponseBytes = 16u << 20;
  // Requests in flight at once, and calls that may wait for one of them.
  static constexpr size_t kDefaultMaxRunning = 16;
  static constexpr size_t kDefaultMaxQueued = 1000;

  HttpFetch(uv_loop_t* loop, size_t maxResponseBytes = kDefaultMaxResponseBytes,
            size_t maxRunning = kDefaultMaxRunning, size_t maxQueued = kDefaultMaxQueued);
  // Abandons running and waiting calls: their callbacks are not called.
  ~HttpFetch();
  HttpFetch(const HttpFetch&) = delete;
  HttpFetch& operator=(const HttpFetch&) = delete;

  // `done` runs once, on the loop, never inside start().
  void start(HttpCall call, std::function<void(Result<HttpAnswer>)> done);
  size_t running() const { return transfers_.size(); }
  size_t queued() const { return queue_.size(); }

 private:
  using Done = std::function<void(Result<HttpAnswer>)>;
  using Clock = std::chrono::steady_clock;
  struct Transfer;
  struct Waiting {
    HttpCall call;
    Done done;
    Clock::time_point since;
    Clock::time_point deadline;
  };
  void begin(HttpCall call, Done done, std::chrono::milliseconds shownTimeout);
  void finish(CURL* easy, CURLcode code);
  // Starts waiting calls while fewer than maxRunning run; answers those
  // whose timeout ran out while they waited.
  void pump();
  void armQueueTimer();
  static void onQueueTimer(uv_timer_t* t);
  // Answers on a later turn of the loop (start() never calls back itself,
  // and an answer may destroy this object).
  void answerSoon(Done done, Error error);
  static void onAnswerSoon(uv_timer_t* t);

  uv_loop_t* loop_;
  size_t maxResponseBytes_;
  size_t maxRunning_;
  size_t maxQueued_;
  // Made on the first request: a project that never fetches pays nothing.
  std::unique_ptr<net::CurlMulti> multi_;
  std::map<CURL*, std::unique_ptr<Transfer>> transfers_;
  std::deque<Waiting> queue_;
  UvHandle<uv_timer_t> queueTimer_;  // the earliest deadline in queue_
  std::vector<std::pair<Done, Error>> answers_;
  UvHandle<uv_timer_t> answerTimer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Checks a method and headers a script gave: HTTP tokens, no line breaks in
// values, and none of the headers that frame the request (Host,
// Content-Length, Transfer-Encoding, Connection), which libcurl sets and a
// script could use to smuggle a second request or reach another host.
Status checkMethod(const std::string& method);
Status checkHeader(const std::string& name, const std::string& value);

// JSON text of {status, headers, body}: what the SDK's Response is built
// from. A body that is not UTF-8 is read as ISO-8859-1 (each byte one
// character), so nothing is lost or replaced: healthcare servers often
// answer in Latin-1.
std::string answerJson(const HttpAnswer& answer);

}  // namespace ductus::supervisor::services
