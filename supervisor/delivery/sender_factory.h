// The sender factory: one destination's settings from interface.yaml (and
// the APIs of resources.yaml) mapped onto the sender of its kind. Senders
// themselves know nothing of the config; this is the one place that does.
#pragma once

#include <uv.h>

#include <filesystem>
#include <memory>

#include "common/config/model.h"
#include "common/result.h"
#include "supervisor/delivery/senders/rate_limiter.h"
#include "supervisor/delivery/senders/sender.h"

namespace ductus::net {
class CurlMulti;
}
namespace ductus::tls {
class Certificates;
}

namespace ductus::delivery {

struct SenderContext {
  uv_loop_t* loop = nullptr;
  net::CurlMulti* curl = nullptr;       // HTTP destinations share it
  const config::Resources* resources = nullptr;
  std::filesystem::path projectRoot;        // relative file paths start here
  // The engine's certificates: entries; a destination with tls: gets its
  // ClientTls from here (one per distinct ConnectTls, shared).
  std::shared_ptr<tls::Certificates> certificates;
};

// The sender for `d`. Routes have no sender (the delivery loop stores their
// output through the target's intake): asking for one is an error, as is a
// kind this engine cannot send to yet. Errors name the interface and the
// destination.
Result<std::unique_ptr<senders::Sender>> makeSender(const SenderContext& ctx,
                                                    const std::string& interfaceName,
                                                    const config::Destination& d);

// The destination's rate limit as the delivery loop applies it, if any.
std::optional<senders::RateLimitSettings> rateLimitOf(const config::Destination& d);

}  // namespace ductus::delivery
