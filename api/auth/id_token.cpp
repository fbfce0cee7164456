#include "api/auth/id_token.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include <algorithm>

#include "common/base64.h"

namespace ductus::api {
namespace {

using json = nlohmann::json;

Error denied(std::string why) { return Error{std::move(why), ErrorKind::Denied}; }

struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Bn = std::unique_ptr<BIGNUM, BnFree>;

Bn bignum(const std::string& bytes) {
  return Bn(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                      static_cast<int>(bytes.size()), nullptr));
}

std::shared_ptr<EVP_PKEY> fromParams(const char* type, OSSL_PARAM_BLD* bld) {
  std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)> params(OSSL_PARAM_BLD_to_param(bld),
                                                                 OSSL_PARAM_free);
  if (!params) return nullptr;
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) <= 0)
    return nullptr;
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

std::string member(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::shared_ptr<EVP_PKEY> rsaKey(const json& jwk) {
  auto n = base64UrlDecode(member(jwk, "n"));
  auto e = base64UrlDecode(member(jwk, "e"));
  // Below 2048 bits a signature proves little.
  if (!n || !e || n->size() < 256 || e->empty()) return nullptr;
  Bn bn = bignum(*n), be = bignum(*e);
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> bld(OSSL_PARAM_BLD_new(),
                                                                      OSSL_PARAM_BLD_free);
  if (!bn || !be || !bld || !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn.get()) ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, be.get()))
    return nullptr;
  return fromParams("RSA", bld.get());
}

// The curve's OpenSSL name and its coordinates' size.
std::pair<const char*, size_t> curveOf(const std::string& crv) {
  if (crv == "P-256") return {"prime256v1", 32};
  if (crv == "P-384") return {"secp384r1", 48};
  return {nullptr, 0};
}

std::shared_ptr<EVP_PKEY> ecKey(const json& jwk) {
  auto [curve, size] = curveOf(member(jwk, "crv"));
  auto x = base64UrlDecode(member(jwk, "x"));
  auto y = base64UrlDecode(member(jwk, "y"));
  if (!curve || !x || !y || x->size() != size || y->size() != size) return nullptr;
  std::string point = "\x04" + *x + *y;  // uncompressed
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> bld(OSSL_PARAM_BLD_new(),
                                                                      OSSL_PARAM_BLD_free);
  if (!bld || !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, curve, 0) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                        point.size()))
    return nullptr;
  return fromParams("EC", bld.get());
}

struct Algorithm {
  const EVP_MD* md = nullptr;
  enum { Rsa, RsaPss, Ec } kind = Rsa;
  const char* curve = nullptr;  // EC only: the curve the key must be on
  size_t half = 0;              // EC only: the size of r and of s
};

std::optional<Algorithm> algorithm(const std::string& alg) {
  if (alg == "RS256") return Algorithm{EVP_sha256(), Algorithm::Rsa};
  if (alg == "RS384") return Algorithm{EVP_sha384(), Algorithm::Rsa};
  if (alg == "RS512") return Algorithm{EVP_sha512(), Algorithm::Rsa};
  if (alg == "PS256") return Algorithm{EVP_sha256(), Algorithm::RsaPss};
  if (alg == "PS384") return Algorithm{EVP_sha384(), Algorithm::RsaPss};
  if (alg == "PS512") return Algorithm{EVP_sha512(), Algorithm::RsaPss};
  if (alg == "ES256") return Algorithm{EVP_sha256(), Algorithm::Ec, "prime256v1", 32};
  if (alg == "ES384") return Algorithm{EVP_sha384(), Algorithm::Ec, "secp384r1", 48};
  return std::nullopt;
}

bool keyFits(const JwkSet::Key& k, const Algorithm& a) {
  if (a.kind != Algorithm::Ec) return k.kty == "RSA";
  if (k.kty != "EC") return false;
  char name[64] = {0};
  size_t len = 0;
  return EVP_PKEY_get_utf8_string_param(k.key.get(), OSSL_PKEY_PARAM_GROUP_NAME, name, sizeof name,
                                        &len) == 1 &&
         std::string_view(name, len) == a.curve;
}

bool verifies(const JwkSet::Key& k, const Algorithm& a, std::string_view signingInput,
              std::string signature) {
  if (a.kind == Algorithm::Ec) {
    // JWS writes r and s side by side (RFC 7518 3.4); OpenSSL takes DER.
    if (signature.size() != 2 * a.half) return false;
    std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(ECDSA_SIG_new(), ECDSA_SIG_free);
    BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data()),
                          static_cast<int>(a.half), nullptr);
    BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(signature.data() + a.half),
                          static_cast<int>(a.half), nullptr);
    if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
      BN_free(r);
      BN_free(s);
      return false;
    }
    unsigned char* der = nullptr;
    int len = i2d_ECDSA_SIG(sig.get(), &der);
    if (len <= 0) return false;
    signature.assign(reinterpret_cast<char*>(der), static_cast<size_t>(len));
    OPENSSL_free(der);
  }
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_PKEY_CTX* pctx = nullptr;
  if (!ctx || EVP_DigestVerifyInit(ctx.get(), &pctx, a.md, nullptr, k.key.get()) != 1) return false;
  if (a.kind == Algorithm::RsaPss &&
      (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
       EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1))
    return false;
  return EVP_DigestVerify(
             ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
             reinterpret_cast<const unsigned char*>(signingInput.data()), signingInput.size()) == 1;
}

// The three parts of a compact JWS.
struct Parts {
  std::string_view header, payload, signature;
};
std::optional<Parts> split(std::string_view token) {
  auto a = token.find('.');
  if (a == std::string_view::npos) return std::nullopt;
  auto b = token.find('.', a + 1);
  if (b == std::string_view::npos || token.find('.', b + 1) != std::string_view::npos)
    return std::nullopt;
  return Parts{token.substr(0, a), token.substr(a + 1, b - a - 1), token.substr(b + 1)};
}

std::optional<json> decodedObject(std::string_view part) {
  auto bytes = base64UrlDecode(part);
  if (!bytes) return std::nullopt;
  json j = json::parse(*bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

}  // namespace

Result<JwkSet> JwkSet::parse(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("keys") || !j["keys"].is_array())
    return Error{"the provider's keys are not a JWK set ({\"keys\": [...]})", ErrorKind::Invalid};
  JwkSet set;
  for (const auto& jwk : j["keys"]) {
    if (!jwk.is_object()) continue;
    std::string use = member(jwk, "use");
    if (!use.empty() && use != "sig") continue;
    Key k;
    k.kid = member(jwk, "kid");
    k.kty = member(jwk, "kty");
    k.alg = member(jwk, "alg");
    if (k.kty == "RSA")
      k.key = rsaKey(jwk);
    else if (k.kty == "EC")
      k.key = ecKey(jwk);
    if (k.key) set.keys_.push_back(std::move(k));
  }
  if (set.keys_.empty())
    return Error{
        "the provider's JWK set has no RSA (2048 bits or more) or P-256/P-384 key to "
        "verify signatures with",
        ErrorKind::Invalid};
  return set;
}

const JwkSet::Key* JwkSet::find(const std::string& kid, const std::string& alg) const {
  auto a = algorithm(alg);
  if (!a) return nullptr;
  const Key* only = nullptr;
  size_t fitting = 0;
  for (const auto& k : keys_) {
    if (!keyFits(k, *a) || (!k.alg.empty() && k.alg != alg)) continue;
    if (!kid.empty() && k.kid == kid) return &k;
    ++fitting;
    only = &k;
  }
  return kid.empty() && fitting == 1 ? only : nullptr;
}

Result<JwsHeader> jwsHeader(std::string_view token) {
  auto parts = split(token);
  if (!parts) return denied("not a JWS in compact form (three parts)");
  auto header = decodedObject(parts->header);
  if (!header) return denied("the token's header is not base64url JSON");
  return JwsHeader{member(*header, "alg"), member(*header, "kid")};
}

Result<json> verifyIdToken(std::string_view token, const JwkSet& keys,
                           const IdTokenExpectations& expect) {
  auto parts = split(token);
  if (!parts) return denied("not a JWS in compact form (three parts)");
  auto header = jwsHeader(token);
  if (!header) return header.error();
  auto alg = algorithm(header->alg);
  if (!alg) return denied("alg `" + header->alg.substr(0, 20) + "` is not one accepted");
  const JwkSet::Key* key = keys.find(header->kid, header->alg);
  if (!key) return denied("no key of the provider's has kid `" + header->kid.substr(0, 64) + "`");
  auto signature = base64UrlDecode(parts->signature);
  if (!signature) return denied("the signature is not base64url");
  std::string_view signingInput = token.substr(0, parts->header.size() + 1 + parts->payload.size());
  if (!verifies(*key, *alg, signingInput, *signature))
    return denied("the signature does not verify with the provider's key");

  auto claims = decodedObject(parts->payload);
  if (!claims) return denied("the claims are not base64url JSON");
  const json& c = *claims;
  if (member(c, "iss") != expect.issuer)
    return denied("iss `" + member(c, "iss").substr(0, 200) + "` is not the issuer");
  std::vector<std::string> audiences;
  if (c.contains("aud") && c["aud"].is_string()) audiences.push_back(c["aud"]);
  if (c.contains("aud") && c["aud"].is_array())
    for (const auto& a : c["aud"])
      if (a.is_string()) audiences.push_back(a);
  if (std::find(audiences.begin(), audiences.end(), expect.clientId) == audiences.end())
    return denied("aud does not name this client (" + expect.clientId + ")");
  if ((audiences.size() > 1 || c.contains("azp")) && member(c, "azp") != expect.clientId)
    return denied("azp does not name this client");
  auto seconds = [&](const char* name) -> std::optional<int64_t> {
    // Whole seconds, within a range where adding the leeway can't overflow.
    if (!c.contains(name) || !c[name].is_number_integer()) return std::nullopt;
    if (c[name].is_number_unsigned() && c[name].get<uint64_t>() > (1ull << 40)) return std::nullopt;
    if (c[name].get<int64_t>() < 0 || c[name].get<int64_t>() > (int64_t{1} << 40))
      return std::nullopt;
    return c[name].get<int64_t>();
  };
  int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(expect.now.time_since_epoch()).count();
  auto exp = seconds("exp");
  auto iat = seconds("iat");
  if (!exp || !iat) return denied("exp or iat is missing");
  if (*exp + expect.leeway.count() <= now) return denied("the token has expired");
  if (*iat - expect.leeway.count() > now) return denied("the token was issued in the future");
  if (member(c, "nonce").empty() || member(c, "nonce") != expect.nonce)
    return denied("the nonce is not the one this sign-in sent");
  if (member(c, "sub").empty()) return denied("sub is missing");
  return c;
}

}  // namespace ductus::api
