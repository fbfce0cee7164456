#include "supervisor/alerts/heartbeat.h"

#include <algorithm>

#include "common/log.h"
#include "common/net/curl_multi_uv.h"

namespace ductus::supervisor::alerts {
namespace {

std::chrono::milliseconds interval(monitor::Seconds every) {
  return std::max<std::chrono::milliseconds>(every, Heartbeat::kMinEvery);
}

std::chrono::milliseconds beatTimeout(monitor::Seconds every) {
  return std::min(interval(every), Heartbeat::kMaxTimeout);
}

}  // namespace

Heartbeat::Heartbeat(net::CurlMulti& multi, monitor::Heartbeat settings,
                     std::shared_ptr<const net::CurlTls> tls)
    : settings_(std::move(settings)),
      sender_(multi, std::move(tls), beatTimeout(settings_.every)),
      timer_(makeTimer(multi.loop(), this)) {
  auto origin = webhookOrigin(settings_.url);
  shown_ = origin ? *origin : "(not a URL)";
}

// The handle closes (its data cleared, so a pending tick does nothing);
// then the sender's destructor abandons a beat in flight.
Heartbeat::~Heartbeat() { timer_.reset(); }

void Heartbeat::start() {
  if (!timer_) return;
  auto every = static_cast<uint64_t>(interval(settings_.every).count());
  uv_timer_start(timer_.get(), &Heartbeat::onTimer, 0, every);
}

void Heartbeat::stop() {
  if (timer_) uv_timer_stop(timer_.get());
}

void Heartbeat::onTimer(uv_timer_t* t) {
  if (auto* self = static_cast<Heartbeat*>(t->data)) self->beat();
}

void Heartbeat::beat() {
  // The last beat still waits for its answer (at most `every`): one at a time.
  if (inFlight_) return;
  inFlight_ = true;
  ++calls_;
  sender_.get(settings_.url, [this](Status s) {
    inFlight_ = false;
    if (!s) {
      ++failures_;
      if (!failing_) spdlog::warn("heartbeat {} fails: {}", shown_, s.error().message);
      failing_ = true;
    } else {
      if (failing_) spdlog::info("heartbeat {} answers again", shown_);
      failing_ = false;
    }
  });
}

}  // namespace ductus::supervisor::alerts
