// Notifier: sends one notification of the alerts' outbox, as the outbox
// runner claims it: an e-mail to a channel's addresses through the
// alerts.smtp server, or a webhook POST. What to send is made elsewhere
// (common/monitor/alert_text.h); when and how often to retry is the
// runner's (supervisor/monitor/); this only sends, on the loop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/monitor/settings.h"
#include "common/result.h"
#include "supervisor/alerts/smtp_sender.h"
#include "supervisor/alerts/webhook_sender.h"

namespace ductus::supervisor::alerts {

// One row of the outbox, as far as sending goes.
struct Outgoing {
  std::string kind;         // "email" or "webhook"
  std::string target;       // e-mail: "a@x, b@y"; webhook: the URL
  std::string subject;      // e-mail only
  std::string body;         // the e-mail's text or the webhook's body
  std::string contentType;  // webhook only; "" : application/json
};

// "a@x, b@y" as addresses, spaces around each trimmed, empty ones left out.
std::vector<std::string> splitAddresses(std::string_view target);

class Notifier {
 public:
  // `smtpTls`: alerts.smtp's ca: as a CurlTls (null: the system's roots);
  // `webTls`: what webhooks verify against (null: the system's roots).
  Notifier(net::CurlMulti& multi, const monitor::AlertSettings& settings,
           std::shared_ptr<const net::CurlTls> smtpTls = nullptr,
           std::shared_ptr<const net::CurlTls> webTls = nullptr,
           std::chrono::milliseconds smtpTimeout = SmtpSender::kDefaultTimeout,
           std::chrono::milliseconds webhookTimeout = WebhookSender::kDefaultTimeout);
  // Abandons sends still running: their callbacks are not called.
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // `done` runs once, on the loop, never inside send().
  void send(const Outgoing& item, std::function<void(Status)> done);

 private:
  void refuse(std::function<void(Status)> done, Error error);

  net::CurlMulti& multi_;
  std::unique_ptr<SmtpSender> smtp_;  // null without alerts.smtp
  WebhookSender webhook_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor::alerts
