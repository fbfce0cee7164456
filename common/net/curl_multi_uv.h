// CurlMulti: libcurl's multi-socket API driven by a libuv loop, so any
// number of HTTP transfers run at once without a thread and without
// blocking the loop. libcurl says which sockets to watch
// (CURLMOPT_SOCKETFUNCTION: one uv_poll per socket) and when to call back
// (CURLMOPT_TIMERFUNCTION: one uv_timer); we tell it what happened with
// curl_multi_socket_action and collect finished transfers with
// curl_multi_info_read. This is the shape of curl's docs/examples/multi-uv.c.
#pragma once

#include <curl/curl.h>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>

#include "common/uv_handle.h"

namespace ductus::net {

class CurlMulti {
 public:
  using Done = std::function<void(CURLcode)>;

  explicit CurlMulti(uv_loop_t* loop);
  // Abandons transfers still running (their Done is not called).
  ~CurlMulti();
  CurlMulti(const CurlMulti&) = delete;
  CurlMulti& operator=(const CurlMulti&) = delete;

  uv_loop_t* loop() const { return loop_; }

  // Starts a transfer; `done` runs on the loop, never inside add(), once it
  // finishes, with its result code (the easy handle then holds the response
  // code etc.). The easy handle stays the caller's; it must outlive the
  // transfer or be cancel()led first.
  void add(CURL* easy, Done done);
  // Stops a transfer without calling its Done. No-op if not running.
  void cancel(CURL* easy);
  size_t running() const { return transfers_.size(); }

 private:
  struct Socket;

  static int onSocket(CURL* easy, curl_socket_t s, int what, void* userp, void* socketp);
  static int onTimerChange(CURLM* multi, long timeoutMs, void* userp);
  void socketAction(curl_socket_t s, int flags);
  void collectFinished();

  uv_loop_t* loop_;
  struct MultiCleanup {
    void operator()(CURLM* m) const { curl_multi_cleanup(m); }
  };
  std::unique_ptr<CURLM, MultiCleanup> multi_;
  UvHandle<uv_timer_t> timer_;
  std::map<curl_socket_t, std::unique_ptr<Socket>> sockets_;
  std::map<CURL*, Done> transfers_;
  std::shared_ptr<CurlMulti*> alive_;
};

}  // namespace ductus::net
