#include "supervisor/delivery/sender_factory.h"

#include "common/net/curl_multi_uv.h"
#include "common/tls/certificates.h"
#include "supervisor/delivery/senders/file_sender.h"
#include "supervisor/delivery/senders/http_sender.h"
#include "supervisor/delivery/senders/mllp_sender.h"
#include "supervisor/delivery/senders/sftp_sender.h"

namespace ductus::delivery {
namespace {

// The ClientTls a destination's tls: names; null when it has none.
Result<std::shared_ptr<tls::ClientTls>> clientTls(const SenderContext& ctx, const std::string& where,
                                                  const tls::ConnectTls& settings) {
  if (!settings.enabled) return std::shared_ptr<tls::ClientTls>();
  if (!ctx.certificates) return Error{where + ": TLS without the engine's certificates"};
  auto client = ctx.certificates->client(settings);
  if (!client) return Error{where + ": " + client.error().message};
  return *client;
}

}  // namespace

Result<std::unique_ptr<senders::Sender>> makeSender(const SenderContext& ctx,
                                                    const std::string& interfaceName,
                                                    const config::Destination& d) {
  const std::string where = interfaceName + "/" + d.name;
  if (auto* m = std::get_if<config::MllpDestination>(&d.target)) {
    senders::MllpSenderSettings s;
    s.host = m->address.host;
    s.port = m->address.port;
    s.ackTimeout = m->ackTimeout;
    auto tls = clientTls(ctx, where, m->tls);
    if (!tls) return tls.error();
    s.tls = *tls;
    return std::unique_ptr<senders::Sender>(std::make_unique<senders::MllpSender>(ctx.loop, s));
  }
  if (auto* h = std::get_if<config::HttpDestination>(&d.target)) {
    senders::HttpSenderSettings s;
    if (!h->api.empty()) {
      if (!ctx.resources) return Error{where + ": no resources.yaml to find api " + h->api + " in"};
      auto api = ctx.resources->apis.find(h->api);
      if (api == ctx.resources->apis.end())
        return Error{where + ": no api " + h->api + " in resources.yaml"};
      s.url = api->second.url + h->path;
      for (auto& [k, v] : api->second.headers) s.headers.emplace_back(k, v);
    } else {
      s.url = h->url;
    }
    // With api: the apis: entry's ca:/certificate:; with url: the destination's.
    auto tls = clientTls(ctx, where, h->api.empty() ? h->tls : ctx.resources->apis.at(h->api).tls);
    if (!tls) return tls.error();
    if (*tls) s.tls = std::make_shared<net::CurlTls>(*tls);
    s.method = h->method;
    for (auto& [k, v] : h->headers) s.headers.emplace_back(k, v);
    s.timeout = h->timeout;
    if (!ctx.curl) return Error{where + ": no HTTP client to send with"};
    return std::unique_ptr<senders::Sender>(std::make_unique<senders::HttpSender>(*ctx.curl, s));
  }
  if (auto* fd = std::get_if<config::FileDestination>(&d.target)) {
    senders::FileSenderSettings s;
    std::filesystem::path dir = fd->path;
    s.dir = (dir.is_absolute() ? dir : ctx.projectRoot / dir).string();
    s.nameTemplate = fd->name;
    s.fileMode = fd->mode;
    s.unnamedFiles = fd->publish == config::FilePublish::Link;
    s.sync = fd->sync == config::FileSyncMode::Each   ? senders::FileSync::Each
             : fd->sync == config::FileSyncMode::None ? senders::FileSync::None
                                                      : senders::FileSync::Group;
    if (auto v = senders::validateNameTemplate(s.nameTemplate); !v)
      return Error{where + ": file name \"" + s.nameTemplate + "\": " + v.error().message};
    return std::unique_ptr<senders::Sender>(std::make_unique<senders::FileSender>(ctx.loop, s));
  }
  if (auto* sd = std::get_if<config::SftpDestination>(&d.target)) {
    senders::SftpSenderSettings s;
    s.server = sd->server;
    s.dir = sd->path;
    s.nameTemplate = sd->name;
    s.fileMode = sd->mode;
    s.who = where;
    if (auto v = senders::validateNameTemplate(s.nameTemplate); !v)
      return Error{where + ": file name \"" + s.nameTemplate + "\": " + v.error().message};
    return std::unique_ptr<senders::Sender>(std::make_unique<senders::SftpSender>(ctx.loop, s));
  }
  if (std::holds_alternative<config::RouteDestination>(d.target))
    return Error{where + ": a route has no sender; its output goes to the target's intake"};
  return Error{where + ": " + config::targetKind(d.target) +
               " destinations are not supported by this engine yet"};
}

std::optional<senders::RateLimitSettings> rateLimitOf(const config::Destination& d) {
  if (!d.rateLimit || d.rateLimit->messages <= 0) return std::nullopt;
  senders::RateLimitSettings rl;
  rl.count = d.rateLimit->messages;
  rl.per = d.rateLimit->per;
  rl.burst = 1;
  rl.mode = d.rateLimit->dropOver ? senders::RateLimitMode::Drop : senders::RateLimitMode::Wait;
  return rl;
}

}  // namespace ductus::delivery
