// OidcClient: the console's single sign-on with an OpenID Connect provider,
// the authorization code flow with PKCE (RFC 7636, S256).
//
// begin() makes a flow: a state, a nonce and a code verifier (32 random
// bytes each), kept here for 10 minutes (at most kMaxFlows at once, then
// Busy), and answers the provider's authorization URL. The browser goes
// there, signs in, and comes back to redirect_uri with a code and the
// state; finish() takes the flow (once: a state is never good twice),
// checks that the browser that comes back is the one that began (the
// state in its cookie, compared in constant time: a code someone else
// obtained can't be planted in a victim's browser), trades the code and
// the verifier for tokens at the token endpoint, and checks the ID token
// (api/auth/id_token.h) against the provider's keys and this flow's nonce.
// The user is then name_claim (lower case) with the highest role
// groups_claim's groups give; none is an identity without a role.
//
// The provider's discovery document is read on first use and kept for an
// hour; its keys are read again when a token names a kid they don't have
// (at most once a minute, so a stream of forged kids can't make the engine
// hammer the provider). Every request goes through `transport` (the
// engine's HttpFetch on the loop), bounded by the settings' timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/audit/sql.h"
#include "api/auth/id_token.h"
#include "api/route.h"
#include "common/oidc/settings.h"
#include "common/result.h"

namespace ductus::api {

struct OidcHttpRequest {
  std::string method;  // GET or POST
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::string> body;
};
struct OidcHttpAnswer {
  long status = 0;
  std::string body;
};
// How the client reaches the provider; `done` runs on the loop, never
// inside the call.
using OidcTransport =
    std::function<void(OidcHttpRequest, std::function<void(Result<OidcHttpAnswer>)> done)>;

struct OidcStart {
  std::string url;    // the provider's authorization endpoint, with the flow's parameters
  std::string state;  // for the browser's cookie
};

struct OidcIdentity {
  std::string subject;
  std::string name;  // name_claim, lower case
  std::vector<std::string> groups;
  std::optional<Role> role;  // none: in no mapped group
};

class OidcClient {
 public:
  static constexpr size_t kMaxFlows = 1000;
  // From one address (SignInGuard::addressOf): one host can't start enough
  // flows to fill the table for everyone.
  static constexpr size_t kMaxFlowsPerAddress = 20;
  static constexpr std::chrono::minutes kFlowLife{10};

  OidcClient(oidc::ProviderSettings settings, OidcTransport transport, Clock clock = systemClock());
  ~OidcClient();
  OidcClient(const OidcClient&) = delete;
  OidcClient& operator=(const OidcClient&) = delete;

  const oidc::ProviderSettings& settings() const { return settings_; }

  // `address`: the browser's, without its port. Error kinds: Busy
  // (kMaxFlows flows under way, or kMaxFlowsPerAddress from this address),
  // Unavailable (the provider's discovery could not be read, or says
  // something unusable).
  void begin(std::string address, std::function<void(Result<OidcStart>)> done);
  // `state`: the query's; `browserState`: the flow cookie's. Error kinds:
  // Denied (no such flow, another browser's, the provider refused the code,
  // an ID token that fails a check: the message says which), Unavailable
  // (the provider could not be asked).
  void finish(std::string code, std::string state, std::string browserState,
              std::function<void(Result<OidcIdentity>)> done);

  size_t flows() const { return flows_.size(); }

 private:
  struct Flow {
    std::string nonce, verifier;
    TimePoint created;
    std::string address;
  };
  // Busy when a new flow from `address` would pass either bound.
  Status roomFor(const std::string& address) const;
  struct Discovery {
    std::string authorizationEndpoint, tokenEndpoint, jwksUri;
    TimePoint readAt;
  };
  void discover(std::function<void(Status)> done);
  void readKeys(std::function<void(Status)> done);
  void redeem(std::string code, Flow flow, std::function<void(Result<OidcIdentity>)> done);
  void check(std::string idToken, Flow flow, bool keysReadAgain,
             std::function<void(Result<OidcIdentity>)> done);
  Result<OidcIdentity> identityOf(const nlohmann::json& claims) const;
  void dropExpiredFlows();

  oidc::ProviderSettings settings_;
  OidcTransport transport_;
  Clock clock_;
  std::map<std::string, Flow> flows_;
  std::optional<Discovery> discovery_;
  std::shared_ptr<const JwkSet> keys_;
  TimePoint keysReadAt_{};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::api
