#include "api/auth/oidc.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cctype>

#include "api/auth/directory.h"
#include "common/base64.h"
#include "common/text.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;

Result<std::string> randomText() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return Error{"RAND_bytes failed"};
  return base64UrlEncode(std::string_view(reinterpret_cast<char*>(bytes), sizeof bytes));
}

std::string challengeOf(const std::string& verifier) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(verifier.data()), verifier.size(), digest);
  return base64UrlEncode(std::string_view(reinterpret_cast<char*>(digest), sizeof digest));
}

Error unavailable(std::string why) { return Error{std::move(why), ErrorKind::Unavailable}; }
Error denied(std::string why) { return Error{std::move(why), ErrorKind::Denied}; }

std::string member(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What an error shows of a provider's answer: its start, one line.
std::string excerpt(const std::string& body) {
  std::string s = body.substr(0, 200);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

constexpr std::chrono::hours kDiscoveryLife{1};
constexpr std::chrono::minutes kKeysAtMostEvery{1};

}  // namespace

OidcClient::OidcClient(oidc::ProviderSettings settings, OidcTransport transport, Clock clock)
    : settings_(std::move(settings)), transport_(std::move(transport)), clock_(std::move(clock)) {}

OidcClient::~OidcClient() {
  *alive_ = false;
  for (auto& [state, flow] : flows_) OPENSSL_cleanse(flow.verifier.data(), flow.verifier.size());
}

void OidcClient::dropExpiredFlows() {
  TimePoint now = clock_();
  for (auto it = flows_.begin(); it != flows_.end();)
    it = now - it->second.created > kFlowLife ? flows_.erase(it) : std::next(it);
}

void OidcClient::discover(std::function<void(Status)> done) {
  if (discovery_ && clock_() - discovery_->readAt < kDiscoveryLife) return done({});
  std::string issuer = settings_.issuer;
  while (!issuer.empty() && issuer.back() == '/') issuer.pop_back();
  std::string url = issuer + "/.well-known/openid-configuration";
  auto alive = alive_;
  transport_(
      {"GET", url, {{"Accept", "application/json"}}, std::nullopt},
      [this, alive, url, done](Result<OidcHttpAnswer> r) {
        if (!*alive) return;
        if (!r)
          return done(unavailable("the provider's discovery (" + url + "): " + r.error().message));
        if (r->status != 200)
          return done(unavailable("the provider's discovery (" + url + ") answered " +
                                  std::to_string(r->status)));
        json d = json::parse(r->body, nullptr, false);
        if (d.is_discarded() || !d.is_object())
          return done(unavailable("the provider's discovery (" + url + ") is not JSON"));
        // OpenID Connect Discovery 1.0 section 4.3: the document is
        // the issuer's only if it names the issuer exactly.
        if (member(d, "issuer") != settings_.issuer)
          return done(unavailable("the provider's discovery names the issuer `" +
                                  member(d, "issuer").substr(0, 200) + "`, not `" +
                                  settings_.issuer + "` (auth.oidc.issuer)"));
        Discovery found{member(d, "authorization_endpoint"), member(d, "token_endpoint"),
                        member(d, "jwks_uri"), clock_()};
        for (const auto& [name, value] :
             {std::pair{"authorization_endpoint", found.authorizationEndpoint},
              std::pair{"token_endpoint", found.tokenEndpoint},
              std::pair{"jwks_uri", found.jwksUri}})
          // Nothing a Location header could be split at, either.
          if (!oidc::secureOrLoopback(value) ||
              std::any_of(value.begin(), value.end(),
                          [](unsigned char c) { return c <= 0x20 || c == 0x7f; }))
            return done(
                unavailable(std::string("the provider's discovery gives no https ") + name));
        if (d.contains("code_challenge_methods_supported") &&
            d["code_challenge_methods_supported"].is_array()) {
          const auto& methods = d["code_challenge_methods_supported"];
          if (std::find(methods.begin(), methods.end(), "S256") == methods.end())
            return done(unavailable("the provider does not take PKCE's S256"));
        }
        discovery_ = std::move(found);
        done({});
      });
}

void OidcClient::readKeys(std::function<void(Status)> done) {
  keysReadAt_ = clock_();
  auto alive = alive_;
  std::string url = discovery_->jwksUri;
  transport_(
      {"GET", url, {{"Accept", "application/json"}}, std::nullopt},
      [this, alive, url, done](Result<OidcHttpAnswer> r) {
        if (!*alive) return;
        if (!r) return done(unavailable("the provider's keys (" + url + "): " + r.error().message));
        if (r->status != 200)
          return done(unavailable("the provider's keys (" + url + ") answered " +
                                  std::to_string(r->status)));
        auto set = JwkSet::parse(r->body);
        if (!set) return done(unavailable(set.error().message));
        keys_ = std::make_shared<const JwkSet>(std::move(*set));
        done({});
      });
}

Status OidcClient::roomFor(const std::string& address) const {
  if (flows_.size() >= kMaxFlows)
    return Error{
        std::to_string(kMaxFlows) + " single sign-ons are under way; try again in a few minutes",
        ErrorKind::Busy};
  size_t mine = 0;
  for (const auto& [state, flow] : flows_) mine += flow.address == address;
  if (mine >= kMaxFlowsPerAddress)
    return Error{"this address has " + std::to_string(kMaxFlowsPerAddress) +
                     " single sign-ons under way; try again in a few minutes",
                 ErrorKind::Busy};
  return {};
}

void OidcClient::begin(std::string address, std::function<void(Result<OidcStart>)> done) {
  dropExpiredFlows();
  if (auto room = roomFor(address); !room) return done(room.error());
  auto alive = alive_;
  discover([this, alive, address, done](Status s) {
    if (!*alive) return;
    if (!s) return done(s.error());
    // Again: others may have begun while the discovery was read.
    if (auto room = roomFor(address); !room) return done(room.error());
    auto state = randomText(), nonce = randomText(), verifier = randomText();
    if (!state || !nonce || !verifier) return done(Error{"no random bytes for the sign-on"});
    std::string scopes;
    for (const auto& sc : settings_.scopes) scopes += (scopes.empty() ? "" : " ") + sc;
    const std::string& endpoint = discovery_->authorizationEndpoint;
    std::string url = endpoint + (endpoint.find('?') == std::string::npos ? "?" : "&") +
                      "response_type=code&client_id=" + percentEncode(settings_.clientId) +
                      "&redirect_uri=" + percentEncode(settings_.redirectUri) +
                      "&scope=" + percentEncode(scopes) + "&state=" + *state + "&nonce=" + *nonce +
                      "&code_challenge=" + challengeOf(*verifier) + "&code_challenge_method=S256";
    flows_[*state] = Flow{*nonce, *verifier, clock_(), address};
    done(OidcStart{url, *state});
  });
}

void OidcClient::finish(std::string code, std::string state, std::string browserState,
                        std::function<void(Result<OidcIdentity>)> done) {
  dropExpiredFlows();
  auto it = flows_.find(state);
  if (it == flows_.end())
    return done(denied("no sign-on under way has this state (expired, used, or never begun)"));
  Flow flow = std::move(it->second);
  flows_.erase(it);  // once, whatever follows
  if (browserState.size() != state.size() ||
      CRYPTO_memcmp(browserState.data(), state.data(), state.size()) != 0)
    return done(denied("the browser that came back is not the one that began the sign-on"));
  if (code.empty() || code.size() > 4096) return done(denied("the provider's code is missing"));
  auto alive = alive_;
  discover([this, alive, code = std::move(code), flow = std::move(flow), done](Status s) mutable {
    if (!*alive) return;
    if (!s) return done(s.error());
    redeem(std::move(code), std::move(flow), std::move(done));
  });
}

void OidcClient::redeem(std::string code, Flow flow,
                        std::function<void(Result<OidcIdentity>)> done) {
  OidcHttpRequest req{
      "POST",
      discovery_->tokenEndpoint,
      {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}},
      std::nullopt};
  std::string body = "grant_type=authorization_code&code=" + percentEncode(code) +
                     "&redirect_uri=" + percentEncode(settings_.redirectUri) +
                     "&code_verifier=" + flow.verifier;
  if (settings_.clientSecret.empty()) {
    body += "&client_id=" + percentEncode(settings_.clientId);
  } else {
    // client_secret_basic (RFC 6749 2.3.1): each form-encoded first.
    req.headers.emplace_back("Authorization",
                             "Basic " + base64Encode(percentEncode(settings_.clientId) + ":" +
                                                     percentEncode(settings_.clientSecret)));
  }
  req.body = std::move(body);
  auto alive = alive_;
  transport_(std::move(req),
             [this, alive, flow = std::move(flow), done](Result<OidcHttpAnswer> r) mutable {
               if (!*alive) return;
               if (!r)
                 return done(unavailable("the provider's token endpoint: " + r.error().message));
               json answer = json::parse(r->body, nullptr, false);
               if (r->status != 200) {
                 // 400 invalid_grant and friends: the code was refused.
                 std::string why = answer.is_object() ? member(answer, "error") : excerpt(r->body);
                 if (r->status >= 400 && r->status < 500)
                   return done(denied("the provider refused the code: " + why));
                 return done(unavailable("the provider's token endpoint answered " +
                                         std::to_string(r->status) + ": " + why));
               }
               if (!answer.is_object() || member(answer, "id_token").empty())
                 return done(denied("the provider's answer has no id_token"));
               check(member(answer, "id_token"), std::move(flow), false, std::move(done));
             });
}

void OidcClient::check(std::string idToken, Flow flow, bool keysReadAgain,
                       std::function<void(Result<OidcIdentity>)> done) {
  auto header = jwsHeader(idToken);
  if (!header) return done(header.error());
  // Keys never read, or a kid they don't have: read them (again), at most
  // once a minute.
  bool known = keys_ && keys_->find(header->kid, header->alg);
  if (!known && !keysReadAgain && (!keys_ || clock_() - keysReadAt_ >= kKeysAtMostEvery)) {
    auto alive = alive_;
    return readKeys([this, alive, idToken = std::move(idToken), flow = std::move(flow),
                     done](Status s) mutable {
      if (!*alive) return;
      if (!s) return done(s.error());
      check(std::move(idToken), std::move(flow), true, std::move(done));
    });
  }
  if (!keys_) return done(unavailable("the provider's keys have not been read"));
  IdTokenExpectations expect{settings_.issuer, settings_.clientId, flow.nonce, clock_()};
  auto claims = verifyIdToken(idToken, *keys_, expect);
  if (!claims) return done(claims.error());
  done(identityOf(*claims));
}

Result<OidcIdentity> OidcClient::identityOf(const json& claims) const {
  OidcIdentity id;
  id.subject = member(claims, "sub");
  id.name = member(claims, settings_.nameClaim.c_str());
  if (id.name.empty())
    return denied("the ID token has no `" + settings_.nameClaim + "` (auth.oidc.name_claim)");
  std::transform(id.name.begin(), id.name.end(), id.name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (claims.contains(settings_.groupsClaim)) {
    const json& g = claims[settings_.groupsClaim];
    if (g.is_string()) id.groups.push_back(g);
    if (g.is_array())
      for (const auto& item : g)
        if (item.is_string()) id.groups.push_back(item);
  }
  id.role = roleOfGroups(settings_.roles, id.groups, {});
  return id;
}

}  // namespace ductus::api
