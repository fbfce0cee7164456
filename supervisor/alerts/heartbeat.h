// Heartbeat: alerts.heartbeat's GET of an outside monitor's URL every
// `every` while the engine serves (the first at start()), so the monitor
// notices an engine that is gone: silence is the alarm. On the loop, with
// libcurl (WebhookSender::get); a call still running when the next is due
// is not doubled. A failure is logged once per change (failing, then
// answering again), not at every beat; the counts are for /metrics.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/monitor/settings.h"
#include "common/uv_handle.h"
#include "supervisor/alerts/webhook_sender.h"

namespace ductus::supervisor::alerts {

class Heartbeat {
 public:
  // The longest a beat may take: a beat is never longer than `every`.
  static constexpr std::chrono::milliseconds kMaxTimeout{15000};
  // The shortest interval: an every: of 0 must not turn into a busy loop
  // of requests.
  static constexpr std::chrono::milliseconds kMinEvery{1000};

  Heartbeat(net::CurlMulti& multi, monitor::Heartbeat settings,
            std::shared_ptr<const net::CurlTls> tls = nullptr);
  // Stops: no call starts and no callback runs after this.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void start();
  // No more beats (one in flight still counts when it ends); start() again resumes.
  void stop();

  uint64_t calls() const { return calls_; }        // beats started
  uint64_t failures() const { return failures_; }  // beats that got no 2xx
  bool failing() const { return failing_; }        // the last beat failed

 private:
  static void onTimer(uv_timer_t* t);
  void beat();

  monitor::Heartbeat settings_;
  std::string shown_;  // the URL's origin, for the log (its path is a token)
  WebhookSender sender_;
  UvHandle<uv_timer_t> timer_;
  bool inFlight_ = false;
  bool failing_ = false;
  uint64_t calls_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace ductus::supervisor::alerts
