#include "supervisor/alerts/notifier.h"

#include "common/net/curl_multi_uv.h"
#include "common/net/loop_post.h"

namespace ductus::supervisor::alerts {

std::vector<std::string> splitAddresses(std::string_view target) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= target.size()) {
    size_t comma = target.find(',', start);
    if (comma == std::string_view::npos) comma = target.size();
    std::string_view a = target.substr(start, comma - start);
    while (!a.empty() && (a.front() == ' ' || a.front() == '\t')) a.remove_prefix(1);
    while (!a.empty() && (a.back() == ' ' || a.back() == '\t')) a.remove_suffix(1);
    if (!a.empty()) out.emplace_back(a);
    start = comma + 1;
  }
  return out;
}

Notifier::Notifier(net::CurlMulti& multi, const monitor::AlertSettings& settings,
                   std::shared_ptr<const net::CurlTls> smtpTls,
                   std::shared_ptr<const net::CurlTls> webTls,
                   std::chrono::milliseconds smtpTimeout,
                   std::chrono::milliseconds webhookTimeout)
    : multi_(multi), webhook_(multi, std::move(webTls), webhookTimeout) {
  if (settings.smtp)
    smtp_ = std::make_unique<SmtpSender>(multi, *settings.smtp, std::move(smtpTls), smtpTimeout);
}

Notifier::~Notifier() { *alive_ = false; }

void Notifier::refuse(std::function<void(Status)> done, Error error) {
  net::postToLoop(multi_.loop(), [alive = alive_, done = std::move(done),
                                  e = std::move(error)]() mutable {
    if (*alive) done(std::move(e));
  });
}

void Notifier::send(const Outgoing& item, std::function<void(Status)> done) {
  if (item.kind == "email") {
    if (!smtp_)
      return refuse(std::move(done),
                    Error{"e-mail to " + item.target + ": alerts has no smtp: server",
                          ErrorKind::Config});
    Email email{.from = {}, .to = splitAddresses(item.target), .subject = item.subject,
                .text = item.body};
    return smtp_->send(std::move(email), std::move(done));
  }
  if (item.kind == "webhook")
    return webhook_.post(item.target, item.body, item.contentType, std::move(done));
  refuse(std::move(done), Error{"a notification of kind \"" + item.kind +
                                    "\" (neither email nor webhook)",
                                ErrorKind::Invalid});
}

}  // namespace ductus::supervisor::alerts
