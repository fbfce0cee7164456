// An OpenID Connect ID token checked as OpenID Connect Core 1.0 section
// 3.1.3.7 says: a JWS in compact form signed by a key of the provider's
// JWKS (RS256/384/512, PS256/384/512, ES256/384; "none" and the HMAC
// algorithms refused, so a token can't choose to be unsigned or signed with
// a public value), issued by the issuer, for this client (aud, and azp when
// there are several audiences), not expired, not issued in the future, and
// carrying the nonce this sign-in sent. Each refusal says which check
// failed, for the audit row; the browser is only told the sign-in failed.
#pragma once

#include <openssl/evp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace ductus::api {

// A provider's signing keys (its jwks_uri), parsed once per fetch. Keys of
// other kinds or uses (enc) are skipped, not refused.
class JwkSet {
 public:
  struct Key {
    std::string kid;
    std::string kty;  // RSA or EC
    std::string alg;  // as the JWK says; empty when it says none
    std::shared_ptr<EVP_PKEY> key;
  };

  // Error kind Invalid: not a JWK set, or no key that can verify.
  static Result<JwkSet> parse(std::string_view json);
  // The key for a token's header: by kid when it has one, else the only
  // key of the algorithm's kind.
  const Key* find(const std::string& kid, const std::string& alg) const;
  size_t size() const { return keys_.size(); }

 private:
  std::vector<Key> keys_;
};

struct IdTokenExpectations {
  std::string issuer;
  std::string clientId;
  std::string nonce;
  std::chrono::system_clock::time_point now;
  std::chrono::seconds leeway{60};  // clocks a minute apart still agree
};

// The token's header, whatever its signature: what find() needs.
struct JwsHeader {
  std::string alg, kid;
};
Result<JwsHeader> jwsHeader(std::string_view token);

// The claims of a token that passed every check. Error kind Denied, the
// message naming the check ("the signature does not verify", "aud ...").
Result<nlohmann::json> verifyIdToken(std::string_view token, const JwkSet& keys,
                                     const IdTokenExpectations& expect);

}  // namespace ductus::api
