// An OpenID Connect provider as ductus.yaml's auth: { oidc: ... } writes it
// (Keycloak, Entra ID, Okta, ADFS): who issues the ID tokens, the client
// the engine is registered as there, where the browser comes back to, and
// which groups give which role. Plain data, filled by common/config (which
// checks it with file and line) and used by api/auth's OIDC client. Never
// logged whole: the client secret is a secret.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/tls/settings.h"

namespace ductus::oidc {

struct ProviderSettings {
  // The issuer exactly as its ID tokens name it; its discovery document is
  // <issuer>/.well-known/openid-configuration. https, or http on loopback.
  std::string issuer;
  std::string clientId;
  // Empty: a public client (PKCE alone); else sent with the code
  // (client_secret_basic).
  std::string clientSecret;
  // The engine's own URL for the provider's answer, as registered there:
  // https://ductus.hospital.org/api/v1/auth/oidc/callback.
  std::string redirectUri;
  // The console's button: "Sign in with <label>".
  std::string label = "single sign-on";
  std::vector<std::string> scopes = {"openid", "profile", "email"};
  // The ID token's claims that name the user and list their groups.
  std::string nameClaim = "preferred_username";
  std::string groupsClaim = "groups";
  std::map<std::string, std::string> roles;  // group (lower case) -> viewer | operator | admin
  tls::ConnectTls tls;                       // ca: for the provider's https
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  std::string at;

  bool enabled() const { return !issuer.empty(); }
};

// https, or http to this machine only: an ID token, a code and a client
// secret never cross a network in clear. Both the configuration's issuer
// and redirect_uri and the endpoints a provider's discovery names.
inline bool secureOrLoopback(std::string_view url) {
  if (url.rfind("https://", 0) == 0) return url.size() > 8;
  if (url.rfind("http://", 0) != 0) return false;
  std::string_view rest = url.substr(7);
  for (std::string_view host : {"127.0.0.1", "localhost", "[::1]"}) {
    if (rest.rfind(host, 0) == 0 &&
        (rest.size() == host.size() || rest[host.size()] == ':' || rest[host.size()] == '/'))
      return true;
  }
  return false;
}

}  // namespace ductus::oidc
