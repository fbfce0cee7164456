// ID tokens (api/auth/id_token.h) and the OIDC client's flow checks
// (api/auth/oidc.h), with keys and tokens made here by OpenSSL directly:
// each check of OpenID Connect Core 3.1.3.7 refuses the token that breaks
// it (a bad signature, another audience, another nonce, expired, ...), and
// a flow is good once, only in the browser that began it. The whole flow
// against a real provider is tests/ui/console_test.cpp's.
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <limits>

#include "api/auth/id_token.h"
#include "api/auth/oidc.h"
#include "common/base64.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::shared_ptr<EVP_PKEY> newKey(const char* type) {
  EVP_PKEY* k = std::string(type) == "RSA" ? EVP_RSA_gen(2048) : EVP_EC_gen("P-256");
  return std::shared_ptr<EVP_PKEY>(k, EVP_PKEY_free);
}

std::string bnParam(EVP_PKEY* k, const char* name, size_t pad = 0) {
  BIGNUM* bn = nullptr;
  EVP_PKEY_get_bn_param(k, name, &bn);
  std::string out(std::max<size_t>(pad, static_cast<size_t>(BN_num_bytes(bn))), '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size()));
  BN_free(bn);
  return out;
}

json jwkOf(EVP_PKEY* k, const std::string& kid) {
  if (EVP_PKEY_get_base_id(k) == EVP_PKEY_RSA)
    return {{"kty", "RSA"},
            {"kid", kid},
            {"use", "sig"},
            {"n", base64UrlEncode(bnParam(k, OSSL_PKEY_PARAM_RSA_N))},
            {"e", base64UrlEncode(bnParam(k, OSSL_PKEY_PARAM_RSA_E))}};
  return {{"kty", "EC"},
          {"kid", kid},
          {"crv", "P-256"},
          {"x", base64UrlEncode(bnParam(k, OSSL_PKEY_PARAM_EC_PUB_X, 32))},
          {"y", base64UrlEncode(bnParam(k, OSSL_PKEY_PARAM_EC_PUB_Y, 32))}};
}

// A compact JWS of `claims`, signed with `key` as `alg` says (RS256 or
// ES256), with `header` beside alg.
std::string sign(EVP_PKEY* key, const std::string& alg, json header, const json& claims) {
  header["alg"] = alg;
  std::string input = base64UrlEncode(header.dump()) + "." + base64UrlEncode(claims.dump());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key);
  size_t len = 0;
  EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                 input.size());
  std::string sig(len, '\0');
  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                 reinterpret_cast<const unsigned char*>(input.data()), input.size());
  sig.resize(len);
  EVP_MD_CTX_free(ctx);
  if (alg == "ES256") {  // DER to JWS's r || s
    const unsigned char* p = reinterpret_cast<const unsigned char*>(sig.data());
    ECDSA_SIG* s = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(sig.size()));
    std::string raw(64, '\0');
    BN_bn2binpad(ECDSA_SIG_get0_r(s), reinterpret_cast<unsigned char*>(raw.data()), 32);
    BN_bn2binpad(ECDSA_SIG_get0_s(s), reinterpret_cast<unsigned char*>(raw.data() + 32), 32);
    ECDSA_SIG_free(s);
    sig = raw;
  }
  return input + "." + base64UrlEncode(sig);
}

const std::string kIssuer = "https://login.hospital.test/realms/h";
const std::chrono::system_clock::time_point kNow =
    std::chrono::system_clock::time_point(1'800'000'000s);

json claims(const std::string& nonce = "n-1") {
  return {{"iss", kIssuer},
          {"sub", "248289761001"},
          {"aud", "ductus"},
          {"exp", 1'800'000'300},
          {"iat", 1'800'000'000 - 5},
          {"nonce", nonce},
          {"preferred_username", "Olivia"},
          {"groups", {"ductus-operators", "nurses"}}};
}

class IdTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    auto set =
        JwkSet::parse(json{{"keys", {jwkOf(rsa_.get(), "r1"), jwkOf(ec_.get(), "e1")}}}.dump());
    ASSERT_TRUE(set.ok()) << set.error().message;
    keys_ = std::move(*set);
  }
  Result<json> check(const std::string& token, const std::string& nonce = "n-1") {
    return verifyIdToken(token, keys_, {kIssuer, "ductus", nonce, kNow});
  }
  std::string refusal(const std::string& token, const std::string& nonce = "n-1") {
    auto r = check(token, nonce);
    EXPECT_FALSE(r.ok()) << "accepted: " << token;
    if (r.ok()) return {};
    EXPECT_EQ(r.error().kind, ErrorKind::Denied);
    return r.error().message;
  }

  std::shared_ptr<EVP_PKEY> rsa_ = newKey("RSA"), ec_ = newKey("EC");
  JwkSet keys_;
};

TEST_F(IdTokens, ARightTokenIsAcceptedSignedWithRsaOrEc) {
  auto r = check(sign(rsa_.get(), "RS256", {{"kid", "r1"}}, claims()));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)["preferred_username"], "Olivia");
  auto e = check(sign(ec_.get(), "ES256", {{"kid", "e1"}}, claims()));
  EXPECT_TRUE(e.ok()) << e.error().message;
  // Without kid: the only key of the algorithm's kind.
  EXPECT_TRUE(check(sign(ec_.get(), "ES256", json::object(), claims())).ok());
}

TEST_F(IdTokens, ABadSignatureIsRefused) {
  std::string good = sign(rsa_.get(), "RS256", {{"kid", "r1"}}, claims());
  // The claims changed after signing: another name.
  auto c = claims();
  c["preferred_username"] = "adam";
  std::string header = good.substr(0, good.find('.'));
  std::string forged = header + "." + base64UrlEncode(c.dump()) + good.substr(good.rfind('.'));
  EXPECT_THAT(refusal(forged), HasSubstr("signature does not verify"));
  // Signed by a key of the attacker's, naming the provider's kid.
  auto other = newKey("RSA");
  EXPECT_THAT(refusal(sign(other.get(), "RS256", {{"kid", "r1"}}, claims())),
              HasSubstr("signature does not verify"));
  // Unsigned, or "signed" with a public value as an HMAC key.
  std::string none =
      base64UrlEncode(R"({"alg":"none"})") + "." + base64UrlEncode(claims().dump()) + ".";
  EXPECT_THAT(refusal(none), HasSubstr("alg `none` is not one accepted"));
  std::string hs = base64UrlEncode(R"({"alg":"HS256","kid":"r1"})") + "." +
                   base64UrlEncode(claims().dump()) + "." + base64UrlEncode("x");
  EXPECT_THAT(refusal(hs), HasSubstr("alg `HS256` is not one accepted"));
  EXPECT_THAT(refusal(sign(rsa_.get(), "RS256", {{"kid", "r9"}}, claims())), HasSubstr("kid `r9`"));
  // An RSA signature under an EC key's kid.
  EXPECT_THAT(refusal(sign(rsa_.get(), "RS256", {{"kid", "e1"}}, claims())), HasSubstr("kid `e1`"));
  EXPECT_THAT(refusal("a.b"), HasSubstr("three parts"));
  EXPECT_THAT(refusal("!!.??.**"), HasSubstr("header"));
}

TEST_F(IdTokens, AnotherAudienceIssuerNonceOrTimeIsRefused) {
  auto with = [&](const std::string& key, json value) {
    auto c = claims();
    if (value.is_null())
      c.erase(key);
    else
      c[key] = value;
    return sign(rsa_.get(), "RS256", {{"kid", "r1"}}, c);
  };
  EXPECT_THAT(refusal(with("aud", "another-app")), HasSubstr("aud does not name this client"));
  EXPECT_THAT(refusal(with("aud", {"another-app", "ductus"})), HasSubstr("azp"));
  auto both = claims();
  both["aud"] = {"another-app", "ductus"};
  both["azp"] = "ductus";
  EXPECT_TRUE(check(sign(rsa_.get(), "RS256", {{"kid", "r1"}}, both)).ok());
  EXPECT_THAT(refusal(with("iss", "https://evil.test")), HasSubstr("is not the issuer"));
  EXPECT_THAT(refusal(sign(rsa_.get(), "RS256", {{"kid", "r1"}}, claims()), "n-2"),
              HasSubstr("nonce"));
  EXPECT_THAT(refusal(with("nonce", nullptr), ""), HasSubstr("nonce"));
  EXPECT_THAT(refusal(with("exp", 1'800'000'000 - 61)), HasSubstr("expired"));
  EXPECT_TRUE(check(with("exp", 1'800'000'000 - 30)).ok()) << "a minute's leeway";
  EXPECT_THAT(refusal(with("iat", 1'800'000'000 + 120)), HasSubstr("future"));
  EXPECT_THAT(refusal(with("exp", "tomorrow")), HasSubstr("exp or iat"));
  EXPECT_THAT(refusal(with("sub", nullptr)), HasSubstr("sub"));
}

TEST(JwkSets, KeysThatCannotVerifyAreSkippedAndASetWithoutAnyIsRefused) {
  auto small = std::shared_ptr<EVP_PKEY>(EVP_RSA_gen(1024), EVP_PKEY_free);
  EXPECT_FALSE(JwkSet::parse(json{{"keys", {jwkOf(small.get(), "s")}}}.dump()).ok())
      << "1024-bit RSA proves too little";
  EXPECT_FALSE(JwkSet::parse("[]").ok());
  EXPECT_FALSE(JwkSet::parse("not json").ok());
  auto ec = newKey("EC");
  json enc = jwkOf(ec.get(), "x");
  enc["use"] = "enc";
  auto set = JwkSet::parse(json{{"keys", {enc, jwkOf(ec.get(), "y"), {{"kty", "oct"}}}}}.dump());
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->size(), 1u);
}

// The client's flow against a provider played by the test: discovery, keys
// and a token endpoint answering what each test says.
class OidcFlow : public ::testing::Test {
 protected:
  OidcFlow() {
    settings_.issuer = kIssuer;
    settings_.clientId = "ductus";
    settings_.clientSecret = "s3cret";
    settings_.redirectUri = "https://ductus.hospital.test/api/v1/auth/oidc/callback";
    settings_.roles = {{"ductus-operators", "operator"}};
    client_ = std::make_unique<OidcClient>(
        settings_,
        [this](OidcHttpRequest req, std::function<void(Result<OidcHttpAnswer>)> done) {
          requests_.push_back(req);
          if (req.url == kIssuer + "/.well-known/openid-configuration")
            return done(OidcHttpAnswer{200, json{{"issuer", kIssuer},
                                                 {"authorization_endpoint", kIssuer + "/auth"},
                                                 {"token_endpoint", kIssuer + "/token"},
                                                 {"jwks_uri", kIssuer + "/jwks"},
                                                 {"code_challenge_methods_supported", {"S256"}}}
                                                .dump()});
          if (req.url == kIssuer + "/jwks")
            return done(OidcHttpAnswer{200, json{{"keys", {jwkOf(rsa_.get(), "r1")}}}.dump()});
          if (req.url == kIssuer + "/token") return done(OidcHttpAnswer{200, tokenAnswer_});
          done(OidcHttpAnswer{404, ""});
        },
        [] { return kNow; });
  }

  OidcStart begin() {
    Result<OidcStart> started = Error{"no answer"};
    client_->begin("192.0.2.7", [&](Result<OidcStart> r) { started = std::move(r); });
    EXPECT_TRUE(started.ok()) << started.error().message;
    return started.ok() ? *started : OidcStart{};
  }
  static std::string param(const std::string& url, const std::string& name) {
    auto at = url.find("&" + name + "=");
    if (at == std::string::npos) return {};
    auto from = at + name.size() + 2;
    return url.substr(from, url.find('&', from) - from);
  }
  Result<OidcIdentity> finish(const std::string& state, const std::string& browserState) {
    Result<OidcIdentity> out = Error{"no answer"};
    client_->finish("the-code", state, browserState,
                    [&](Result<OidcIdentity> r) { out = std::move(r); });
    return out;
  }

  oidc::ProviderSettings settings_;
  std::shared_ptr<EVP_PKEY> rsa_ = newKey("RSA");
  std::string tokenAnswer_;
  std::vector<OidcHttpRequest> requests_;
  std::unique_ptr<OidcClient> client_;
};

TEST_F(OidcFlow, ACodeIsTradedWithItsVerifierAndTheTokenMustCarryThisFlowsNonce) {
  OidcStart s = begin();
  EXPECT_THAT(s.url, ::testing::StartsWith(kIssuer + "/auth?response_type=code&client_id=ductus"));
  EXPECT_EQ(param(s.url, "state"), s.state);
  EXPECT_EQ(param(s.url, "code_challenge_method"), "S256");
  std::string nonce = param(s.url, "nonce");
  ASSERT_FALSE(nonce.empty());
  tokenAnswer_ =
      json{{"id_token", sign(rsa_.get(), "RS256", {{"kid", "r1"}}, claims(nonce))}}.dump();
  auto who = finish(s.state, s.state);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->name, "olivia");
  EXPECT_EQ(who->role, Role::Operator);
  // The token request: the verifier whose S256 the URL carried, the
  // secret as HTTP Basic.
  auto post = std::find_if(requests_.begin(), requests_.end(),
                           [](const OidcHttpRequest& r) { return r.url == kIssuer + "/token"; });
  ASSERT_NE(post, requests_.end());
  const auto& token = *post;
  EXPECT_EQ(token.method, "POST");
  ASSERT_TRUE(token.body);
  EXPECT_THAT(*token.body, HasSubstr("grant_type=authorization_code&code=the-code"));
  std::string verifier = token.body->substr(token.body->find("code_verifier=") + 14);
  unsigned char digest[32];
  EVP_Digest(verifier.data(), verifier.size(), digest, nullptr, EVP_sha256(), nullptr);
  EXPECT_EQ(param(s.url, "code_challenge"),
            base64UrlEncode(std::string(reinterpret_cast<char*>(digest), 32)));
  EXPECT_EQ(token.headers.back().second, "Basic " + base64Encode("ductus:s3cret"));
  // The same state again: the flow is spent.
  auto again = finish(s.state, s.state);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().message, HasSubstr("no sign-on under way"));
}

TEST_F(OidcFlow, AnotherBrowserAnotherNonceOrAnotherAudienceIsRefused) {
  OidcStart s = begin();
  tokenAnswer_ =
      json{{"id_token", sign(rsa_.get(), "RS256", {{"kid", "r1"}}, claims(param(s.url, "nonce")))}}
          .dump();
  auto other = finish(s.state, "not-the-cookie");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.error().message, HasSubstr("not the one that began"));

  OidcStart t = begin();
  tokenAnswer_ =
      json{{"id_token", sign(rsa_.get(), "RS256", {{"kid", "r1"}}, claims("an-old-nonce"))}}.dump();
  auto replayed = finish(t.state, t.state);
  ASSERT_FALSE(replayed.ok());
  EXPECT_THAT(replayed.error().message, HasSubstr("nonce"));

  OidcStart u = begin();
  auto c = claims(param(u.url, "nonce"));
  c["aud"] = "another-app";
  tokenAnswer_ = json{{"id_token", sign(rsa_.get(), "RS256", {{"kid", "r1"}}, c)}}.dump();
  auto elsewhere = finish(u.state, u.state);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.error().kind, ErrorKind::Denied);
  EXPECT_THAT(elsewhere.error().message, HasSubstr("aud"));
}

TEST_F(OidcFlow, SomeoneInNoMappedGroupHasNoRole) {
  OidcStart s = begin();
  auto c = claims(param(s.url, "nonce"));
  c["groups"] = {"nurses"};
  tokenAnswer_ = json{{"id_token", sign(rsa_.get(), "RS256", {{"kid", "r1"}}, c)}}.dump();
  auto who = finish(s.state, s.state);
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(who->role, std::nullopt);
}

TEST_F(OidcFlow, OneAddressCanStartOnlyItsShareOfFlows) {
  for (size_t k = 0; k < OidcClient::kMaxFlowsPerAddress; ++k) begin();
  Result<OidcStart> refused = Error{"no answer"};
  client_->begin("192.0.2.7", [&](Result<OidcStart> r) { refused = std::move(r); });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::Busy);
  Result<OidcStart> other = Error{"no answer"};
  client_->begin("192.0.2.8", [&](Result<OidcStart> r) { other = std::move(r); });
  EXPECT_TRUE(other.ok()) << "another address still may";
}

TEST_F(IdTokens, ExpiryAndIssueTimesMustBeWholeSecondsInRange) {
  auto with = [&](const std::string& key, json value) {
    auto c = claims();
    c[key] = value;
    return sign(rsa_.get(), "RS256", {{"kid", "r1"}}, c);
  };
  EXPECT_THAT(refusal(with("exp", 1.8e9 + 300.5)), HasSubstr("exp or iat"));
  EXPECT_THAT(refusal(with("exp", 9.3e18)), HasSubstr("exp or iat"));
  EXPECT_THAT(refusal(with("exp", std::numeric_limits<int64_t>::max())), HasSubstr("exp or iat"));
  EXPECT_THAT(refusal(with("iat", std::numeric_limits<uint64_t>::max())), HasSubstr("exp or iat"));
}

}  // namespace
}  // namespace ductus::api::test
