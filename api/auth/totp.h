// A local user's second factor: time-based one-time codes (TOTP, RFC 6238,
// over HOTP, RFC 4226) as every authenticator app reads them from an
// otpauth:// URI by default: HMAC-SHA-1, 6 digits, 30-second steps. The
// secret is 20 random bytes, kept as its base32 text (what the app is
// given); a code is accepted one step either side of now (clocks drift),
// and never for a step at or before the last one used, so an overheard
// code cannot be played again. Recovery codes stand in for a lost phone,
// each once; only their SHA-256 is kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ductus::api {

inline constexpr int64_t kTotpStepSeconds = 30;
inline constexpr int kTotpDigits = 6;
inline constexpr size_t kRecoveryCodeCount = 10;

// 20 bytes from RAND_bytes as base32 (32 letters A-Z and digits 2-7).
Result<std::string> newTotpSecret();
std::string base32Encode(std::string_view bytes);
// Upper or lower case, spaces and '=' padding ignored; any other
// character is an Error.
Result<std::string> base32Decode(std::string_view text);

// The step a time falls in: seconds since 1970 / 30.
int64_t totpStep(std::chrono::system_clock::time_point at);
// The code of `step` for the key (its bytes, not its base32): 6 digits.
std::string totpCode(std::string_view key, int64_t step);
// The step whose code `code` is, among now's and the one either side,
// newer than `lastUsedStep`; nullopt when none is (a wrong, stale or
// replayed code, or one that is not 6 digits).
std::optional<int64_t> matchTotp(std::string_view base32Secret, std::string_view code,
                                 std::chrono::system_clock::time_point now,
                                 std::optional<int64_t> lastUsedStep);

// otpauth://totp/Issuer:account?secret=...&issuer=Issuer&algorithm=SHA1&digits=6&period=30
std::string otpauthUri(std::string_view issuer, std::string_view account,
                       std::string_view base32Secret);

// Ten codes "xxxxx-xxxxx" (lowercase base32), to be shown once.
Result<std::vector<std::string>> newRecoveryCodes();
// What is kept of a recovery code: the SHA-256 (hex) of its letters,
// lowercased, without dashes or spaces, so "ABCDE FGHIJ" is "abcde-fghij".
std::string recoveryCodeHash(std::string_view code);

}  // namespace ductus::api
