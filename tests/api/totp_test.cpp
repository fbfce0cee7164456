// A local user's second factor (api/auth/totp.h, api/auth/totp_routes.h):
// the code arithmetic against RFC 6238's own vectors, and over real HTTP
// with the real authenticator, PostgreSQL and argon2id: enrolling, sign-in
// with password and code (codes computed by Python's hmac, not by the
// engine's code), replay, recovery codes, a role that requires it, an
// admin's reset, and the audit rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/auth/totp.h"
#include "tests/api/auth_fixture.h"
#include "tests/support/test_env.h"

namespace ductus::api::test {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::chrono::system_clock::time_point at(int64_t unixSeconds) {
  return std::chrono::system_clock::time_point(std::chrono::seconds(unixSeconds));
}

// The code an authenticator app would show at `unixTime`, computed by
// Python's standard library from the base32 secret alone.
std::string appCode(const std::string& base32, int64_t unixTime) {
  auto r = ductus::test::runChild(
      {"/usr/bin/python3", "-c",
       "import base64, hashlib, hmac, struct, sys\n"
       "key = base64.b32decode(sys.argv[1])\n"
       "mac = hmac.new(key, struct.pack('>Q', int(sys.argv[2]) // 30), hashlib.sha1).digest()\n"
       "o = mac[-1] & 15\n"
       "print('%06d' % ((struct.unpack('>I', mac[o:o + 4])[0] & 0x7fffffff) % 1000000))\n",
       base32, std::to_string(unixTime)});
  EXPECT_EQ(r.exitStatus, 0);
  while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  return r.out;
}

// RFC 6238, appendix B: the SHA-1 rows, key "12345678901234567890"; the
// published codes have 8 digits, an app's 6 are their last six.
TEST(TotpCodes, MatchTheRfcsSha1Vectors) {
  const std::string key = "12345678901234567890";
  EXPECT_EQ(totpCode(key, totpStep(at(59))), "287082");
  EXPECT_EQ(totpCode(key, totpStep(at(1111111109))), "081804");
  EXPECT_EQ(totpCode(key, totpStep(at(1111111111))), "050471");
  EXPECT_EQ(totpCode(key, totpStep(at(1234567890))), "005924");
  EXPECT_EQ(totpCode(key, totpStep(at(2000000000))), "279037");
  // Year 2603: past what a nanosecond system_clock holds, so as its step.
  EXPECT_EQ(totpCode(key, 20000000000 / kTotpStepSeconds), "353130");
}

TEST(TotpCodes, AStepEitherSideMatchesAndAUsedOrOlderStepDoesNot) {
  std::string secret = base32Encode("12345678901234567890");
  EXPECT_EQ(secret, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
  auto now = at(1111111111);  // step 37037037
  EXPECT_EQ(matchTotp(secret, "050471", now, std::nullopt), 37037037);
  EXPECT_EQ(matchTotp(secret, "050471", now + 30s, std::nullopt), 37037037);
  EXPECT_EQ(matchTotp(secret, "050471", now - 30s, std::nullopt), 37037037);
  EXPECT_EQ(matchTotp(secret, "050471", now + 60s, std::nullopt), std::nullopt);
  EXPECT_EQ(matchTotp(secret, "050471", now, 37037036), 37037037);
  EXPECT_EQ(matchTotp(secret, "050471", now, 37037037), std::nullopt);  // played again
  EXPECT_EQ(matchTotp(secret, "050472", now, std::nullopt), std::nullopt);
  EXPECT_EQ(matchTotp(secret, "50471", now, std::nullopt), std::nullopt);
  EXPECT_EQ(matchTotp(secret, "0504711", now, std::nullopt), std::nullopt);
  EXPECT_EQ(matchTotp(secret, "05047a", now, std::nullopt), std::nullopt);
  EXPECT_EQ(matchTotp("not base32!", "050471", now, std::nullopt), std::nullopt);
}

TEST(TotpCodes, Base32RoundTripsTheSecretAndTheUriCarriesIt) {
  auto secret = newTotpSecret();
  ASSERT_TRUE(secret);
  EXPECT_EQ(secret->size(), 32u);
  auto bytes = base32Decode(*secret);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size(), 20u);
  EXPECT_EQ(base32Encode(*bytes), *secret);
  EXPECT_FALSE(base32Decode("ABC1"));
  EXPECT_EQ(*base32Decode("gezdgnbv gy3tqojq"), "1234567890");
  EXPECT_EQ(otpauthUri("Ductus", "ann@ward 3", "ABCD"),
            "otpauth://totp/Ductus:ann%40ward%203?secret=ABCD&issuer=Ductus&algorithm=SHA1"
            "&digits=6&period=30");
  auto codes = newRecoveryCodes();
  ASSERT_TRUE(codes);
  EXPECT_EQ(codes->size(), 10u);
  EXPECT_THAT((*codes)[0], ::testing::MatchesRegex("[a-z2-7]{5}-[a-z2-7]{5}"));
  EXPECT_EQ(recoveryCodeHash("ABCDE FGHIJ"), recoveryCodeHash("abcde-fghij"));
}

class TotpTest : public AuthFixture {
 protected:
  int64_t now() {
    return std::chrono::duration_cast<std::chrono::seconds>(clock_().time_since_epoch()).count();
  }
  std::vector<std::string> auditRows(const std::string& like) {
    return db_.column(
        "SELECT action || ' ' || outcome || coalesce(' ' || (detail->>'reason'), '') "
        "FROM audit_log WHERE action LIKE $1 ORDER BY id",
        {like});
  }
  ductus::test::HttpReply signInWith(const std::string& name, const std::string& password,
                                     const std::string& field, const std::string& code) {
    return call("POST", "/api/v1/sessions", {},
                json{{"name", name}, {"password", password}, {field, code}}.dump());
  }
  // Signs in, sets up and confirms a second factor; returns its secret and
  // the recovery codes.
  std::pair<std::string, std::vector<std::string>> enroll(const std::string& name,
                                                          const std::string& password) {
    auto session = sessionOf(signIn(name, password));
    auto begun = call("POST", "/api/v1/me/totp", cookie(session, true),
                      json{{"password", password}}.dump());
    EXPECT_EQ(begun.status, 201) << begun.body;
    std::string secret = bodyOf(begun)["secret"];
    auto confirmed = call("POST", "/api/v1/me/totp/confirm", cookie(session, true),
                          json{{"code", appCode(secret, now())}}.dump());
    EXPECT_EQ(confirmed.status, 200) << confirmed.body;
    return {secret, bodyOf(confirmed)["recoveryCodes"].get<std::vector<std::string>>()};
  }
};

TEST_F(TotpTest, OnceEnrolledAPasswordAloneIsRefusedAndPasswordPlusTheCurrentCodeSignsIn) {
  makeUser("nina", Role::Operator, kNoPermission, "nina's long password");
  auto session = sessionOf(signIn("nina", "nina's long password"));
  ASSERT_FALSE(session.empty());

  // The session alone is not enough: the password again.
  EXPECT_EQ(call("POST", "/api/v1/me/totp", cookie(session, true)).status, 400);
  auto notHers = call("POST", "/api/v1/me/totp", cookie(session, true),
                      json{{"password", "someone else's password"}}.dump());
  EXPECT_EQ(notHers.status, 403);
  EXPECT_EQ(bodyOf(notHers)["error"], "wrong_password");
  auto begun = call("POST", "/api/v1/me/totp", cookie(session, true),
                    json{{"password", "nina's long password"}}.dump());
  ASSERT_EQ(begun.status, 201) << begun.body;
  std::string secret = bodyOf(begun)["secret"];
  EXPECT_THAT(secret, ::testing::MatchesRegex("[A-Z2-7]{32}"));
  EXPECT_EQ(bodyOf(begun)["uri"], "otpauth://totp/Ductus:nina?secret=" + secret +
                                      "&issuer=Ductus&algorithm=SHA1&digits=6&period=30");
  EXPECT_EQ(begun.header("cache-control"), "no-store");
  // Not on until confirmed: the password alone still signs in.
  EXPECT_EQ(signIn("nina", "nina's long password").status, 201);

  // A code of another time is not the one the app shows now.
  auto wrong = call("POST", "/api/v1/me/totp/confirm", cookie(session, true),
                    json{{"code", appCode(secret, now() - 600)}}.dump());
  EXPECT_EQ(wrong.status, 400);
  EXPECT_EQ(bodyOf(wrong)["error"], "wrong_code");
  auto confirmed = call("POST", "/api/v1/me/totp/confirm", cookie(session, true),
                        json{{"code", appCode(secret, now())}}.dump());
  ASSERT_EQ(confirmed.status, 200) << confirmed.body;
  auto recovery = bodyOf(confirmed)["recoveryCodes"].get<std::vector<std::string>>();
  EXPECT_EQ(recovery.size(), 10u);
  EXPECT_EQ(bodyOf(call("GET", "/api/v1/me", cookie(session)))["totp"], true);
  EXPECT_EQ(db_.value("SELECT count(*) FROM users WHERE name = 'nina' AND totp_enabled "
                      "AND cardinality(totp_recovery) = 10 AND NOT ($1 = ANY (totp_recovery))",
                      {recovery[0]}),
            "1");  // kept as hashes

  // The password alone: 401, and the console knows to ask for the code.
  auto alone = signIn("nina", "nina's long password");
  EXPECT_EQ(alone.status, 401);
  EXPECT_EQ(bodyOf(alone)["error"], "code_required");
  auto bad = signInWith("nina", "nina's long password", "code", appCode(secret, now() - 600));
  EXPECT_EQ(bad.status, 401);
  EXPECT_EQ(bodyOf(bad)["error"], "invalid_credentials");
  // The wrong password with the right code tells nothing about the code.
  auto badPassword = signInWith("nina", "not nina's password", "code", appCode(secret, now() + 30));
  EXPECT_EQ(badPassword.status, 401);
  EXPECT_EQ(bodyOf(badPassword)["error"], "invalid_credentials");
  // The confirm used this step's code: the next step's signs in, once.
  std::string next = appCode(secret, now() + 30);
  auto ok = signInWith("nina", "nina's long password", "code", next);
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(bodyOf(ok)["user"]["totp"], true);
  EXPECT_EQ(signInWith("nina", "nina's long password", "code", next).status, 401);

  // A recovery code, in any case and spacing, once.
  std::string upper = recovery[3];
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(signInWith("nina", "nina's long password", "recoveryCode", upper).status, 201);
  EXPECT_EQ(signInWith("nina", "nina's long password", "recoveryCode", recovery[3]).status, 401);
  EXPECT_EQ(db_.value("SELECT detail->>'recoveryCodesLeft' FROM audit_log "
                      "WHERE detail->>'factor' = 'recovery code'"),
            "9");

  EXPECT_THAT(auditRows("session.create%"),
              ::testing::ElementsAre("session.create ok", "session.create ok",
                                     "session.create denied code required",
                                     "session.create denied wrong code",
                                     "session.create denied wrong password", "session.create ok",
                                     "session.create denied wrong code", "session.create ok",
                                     "session.create denied wrong recovery code"));
  EXPECT_THAT(auditRows("user.totp%"),
              ::testing::ElementsAre("user.totp.begin denied wrong password", "user.totp.begin ok",
                                     "user.totp.enable denied wrong code", "user.totp.enable ok"));
  // Wrong codes count towards the lockout as wrong passwords do: one since
  // the last success (the wrong recovery code).
  EXPECT_EQ(db_.value("SELECT failed_attempts FROM users WHERE name = 'nina'"), "1");
}

TEST_F(TotpTest, FiveWrongCodesLockTheUserAsFiveWrongPasswordsDo) {
  makeUser("olga", Role::Viewer, kNoPermission, "olga's long password");
  auto [secret, recovery] = enroll("olga", "olga's long password");
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(signInWith("olga", "olga's long password", "code", appCode(secret, now() - 600 - 30 * i))
                  .status,
              401);
  auto locked = signInWith("olga", "olga's long password", "code", appCode(secret, now() + 30));
  EXPECT_EQ(locked.status, 429) << locked.body;
}

TEST_F(TotpTest, ARoleThatRequiresASecondFactorLimitsItsSessionsToSettingOneUp) {
  makeUser("root", Role::Admin, kNoPermission, "the admin's password");
  makeUser("paul", Role::Operator, kNoPermission, "paul's long password");
  auto admin = sessionOf(signIn("root", "the admin's password"));
  auto paulBefore = sessionOf(signIn("paul", "paul's long password"));

  // Only admins choose, and only roles.
  EXPECT_EQ(call("PUT", "/api/v1/auth/totp", cookie(paulBefore, true),
                 json{{"requiredFor", json::array({"operator"})}}.dump())
                .status,
            403);
  auto badRole = call("PUT", "/api/v1/auth/totp", cookie(admin, true),
                      json{{"requiredFor", json::array({"operator", "root"})}}.dump());
  EXPECT_EQ(badRole.status, 400);
  EXPECT_THAT(bodyOf(badRole)["message"].get<std::string>(), HasSubstr("\"root\""));
  auto put = call("PUT", "/api/v1/auth/totp", cookie(admin, true),
                  json{{"requiredFor", json::array({"operator", "operator"})}}.dump());
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(bodyOf(put)["requiredFor"], json::array({"operator"}));
  EXPECT_EQ(bodyOf(call("GET", "/api/v1/auth/totp", cookie(admin)))["requiredFor"],
            json::array({"operator"}));

  // Paul's session, begun before, and a new one may now only set it up.
  auto refused = call("GET", "/api/v1/me/activity", cookie(paulBefore));
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(bodyOf(refused)["error"], "totp_required");
  auto fresh = signIn("paul", "paul's long password");
  ASSERT_EQ(fresh.status, 201);
  EXPECT_EQ(bodyOf(fresh)["user"]["totpRequired"], true);
  std::string paul = sessionOf(fresh);
  EXPECT_EQ(bodyOf(call("GET", "/api/v1/me", cookie(paul)))["totpRequired"], true);
  auto begun = call("POST", "/api/v1/me/totp", cookie(paul, true),
                    json{{"password", "paul's long password"}}.dump());
  ASSERT_EQ(begun.status, 201) << begun.body;
  std::string secret = bodyOf(begun)["secret"];
  ASSERT_EQ(call("POST", "/api/v1/me/totp/confirm", cookie(paul, true),
                 json{{"code", appCode(secret, now())}}.dump())
                .status,
            200);
  EXPECT_EQ(call("GET", "/api/v1/me/activity", cookie(paul)).status, 200);
  // Required: not turned off by its user.
  auto off = call("POST", "/api/v1/me/totp/disable", cookie(paul, true),
                  json{{"code", appCode(secret, now() + 30)}}.dump());
  EXPECT_EQ(off.status, 409);
  EXPECT_EQ(bodyOf(off)["error"], "required");
  // The admin's own role is not required: untouched.
  EXPECT_EQ(call("GET", "/api/v1/users", cookie(admin)).status, 200);
}

TEST_F(TotpTest, AnAdminsResetEndsTheUsersSessionsAndThePasswordAloneSignsInAgain) {
  makeUser("root", Role::Admin, kNoPermission, "the admin's password");
  makeUser("rita", Role::Viewer, kNoPermission, "rita's long password");
  auto [secret, recovery] = enroll("rita", "rita's long password");
  auto rita = sessionOf(signInWith("rita", "rita's long password", "code", appCode(secret, now() + 30)));
  ASSERT_FALSE(rita.empty());
  auto admin = sessionOf(signIn("root", "the admin's password"));
  auto users = bodyOf(call("GET", "/api/v1/users", cookie(admin)))["items"];
  bool listed = false;
  for (auto& u : users)
    if (u["name"] == "rita") listed = u["totp"] == true;
  EXPECT_TRUE(listed) << users.dump();

  EXPECT_EQ(call("DELETE", "/api/v1/users/rita/totp", cookie(rita, true)).status, 403);
  EXPECT_EQ(call("DELETE", "/api/v1/users/nobody/totp", cookie(admin, true)).status, 404);
  ASSERT_EQ(call("DELETE", "/api/v1/users/rita/totp", cookie(admin, true)).status, 204);
  EXPECT_EQ(call("GET", "/api/v1/me", cookie(rita)).status, 401);
  EXPECT_EQ(signIn("rita", "rita's long password").status, 201);
  EXPECT_EQ(db_.value("SELECT detail->>'sessionsEnded' FROM audit_log WHERE action = "
                      "'user.totp.reset'"),
            "2");  // enroll()'s and the one signed in with a code
}

TEST_F(TotpTest, ItsUserTurnsItOffWithACurrentCodeOnly) {
  makeUser("sara", Role::Viewer, kNoPermission, "sara's long password");
  auto [secret, recovery] = enroll("sara", "sara's long password");
  auto sara = sessionOf(signInWith("sara", "sara's long password", "code", appCode(secret, now() + 30)));
  ASSERT_FALSE(sara.empty());
  // On already: a second setup is refused until it is off.
  EXPECT_EQ(call("POST", "/api/v1/me/totp", cookie(sara, true),
                 json{{"password", "sara's long password"}}.dump())
                .status,
            409);
  auto wrong = call("POST", "/api/v1/me/totp/disable", cookie(sara, true),
                    json{{"code", appCode(secret, now() - 600)}}.dump());
  EXPECT_EQ(wrong.status, 400);
  EXPECT_EQ(bodyOf(wrong)["error"], "wrong_code");
  // The code the sign-in used is spent; the step after it is not.
  auto spent = call("POST", "/api/v1/me/totp/disable", cookie(sara, true),
                    json{{"code", appCode(secret, now() + 30)}}.dump());
  EXPECT_EQ(spent.status, 400);
  EXPECT_EQ(bodyOf(spent)["error"], "wrong_code");
  advance(30s);
  ASSERT_EQ(call("POST", "/api/v1/me/totp/disable", cookie(sara, true),
                 json{{"code", appCode(secret, now() + 30)}}.dump())
                .status,
            204);
  EXPECT_EQ(signIn("sara", "sara's long password").status, 201);
  // A token is no session: it can't turn one on.
  auto token = makeToken("sara-script", Role::Viewer, kNoPermission, "sara");
  auto byToken = call("POST", "/api/v1/me/totp", bearer(token.token),
                      json{{"password", "sara's long password"}}.dump());
  EXPECT_EQ(byToken.status, 400);
  EXPECT_EQ(bodyOf(byToken)["error"], "not_a_session");
}

}  // namespace
}  // namespace ductus::api::test
