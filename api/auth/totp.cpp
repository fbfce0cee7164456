#include "api/auth/totp.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cctype>

#include "common/sha256.h"
#include "common/text.h"

namespace ductus::api {
namespace {

constexpr std::string_view kBase32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

Result<std::string> randomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    return Error{"the system's random source failed (RAND_bytes)"};
  return out;
}

}  // namespace

std::string base32Encode(std::string_view bytes) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out += kBase32[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kBase32[(buffer << (5 - bits)) & 31];
  return out;
}

Result<std::string> base32Decode(std::string_view text) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char ch : text) {
    if (ch == ' ' || ch == '=') continue;
    auto at = kBase32.find(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
    if (at == std::string_view::npos)
      return Error{"not base32: a character other than A-Z and 2-7", ErrorKind::Invalid};
    buffer = (buffer << 5) | static_cast<uint32_t>(at);
    bits += 5;
    if (bits >= 8) {
      out += static_cast<char>((buffer >> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return out;
}

Result<std::string> newTotpSecret() {
  auto key = randomBytes(20);
  if (!key) return key.error();
  auto text = base32Encode(*key);
  OPENSSL_cleanse(key->data(), key->size());
  return text;
}

int64_t totpStep(std::chrono::system_clock::time_point at) {
  auto s = std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
  return s < 0 ? 0 : s / kTotpStepSeconds;
}

std::string totpCode(std::string_view key, int64_t step) {
  unsigned char counter[8];
  for (int i = 7; i >= 0; --i) {
    counter[i] = static_cast<unsigned char>(step & 0xff);
    step >>= 8;
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int macLength = 0;
  HMAC(EVP_sha1(), key.data(), static_cast<int>(key.size()), counter, sizeof counter, mac,
       &macLength);
  // RFC 4226 5.3: dynamic truncation.
  int offset = mac[macLength - 1] & 0x0f;
  uint32_t binary = (static_cast<uint32_t>(mac[offset] & 0x7f) << 24) |
                    (static_cast<uint32_t>(mac[offset + 1]) << 16) |
                    (static_cast<uint32_t>(mac[offset + 2]) << 8) |
                    static_cast<uint32_t>(mac[offset + 3]);
  std::string code = std::to_string(binary % 1000000);
  return std::string(kTotpDigits - code.size(), '0') + code;
}

std::optional<int64_t> matchTotp(std::string_view base32Secret, std::string_view code,
                                 std::chrono::system_clock::time_point now,
                                 std::optional<int64_t> lastUsedStep) {
  if (code.size() != static_cast<size_t>(kTotpDigits)) return std::nullopt;
  for (char c : code)
    if (c < '0' || c > '9') return std::nullopt;
  auto key = base32Decode(base32Secret);
  if (!key || key->empty()) return std::nullopt;
  int64_t step = totpStep(now);
  std::optional<int64_t> found;
  // Every candidate is computed and compared in constant time, so the
  // answer's timing tells nothing of which step matched.
  for (int64_t s = step - 1; s <= step + 1; ++s) {
    auto expected = totpCode(*key, s);
    bool same = CRYPTO_memcmp(expected.data(), code.data(), code.size()) == 0;
    if (same && (!lastUsedStep || s > *lastUsedStep) && !found) found = s;
  }
  OPENSSL_cleanse(key->data(), key->size());
  return found;
}

std::string otpauthUri(std::string_view issuer, std::string_view account,
                       std::string_view base32Secret) {
  std::string is = percentEncode(issuer);
  return "otpauth://totp/" + is + ":" + percentEncode(account) + "?secret=" +
         std::string(base32Secret) + "&issuer=" + is + "&algorithm=SHA1&digits=" +
         std::to_string(kTotpDigits) + "&period=" + std::to_string(kTotpStepSeconds);
}

Result<std::vector<std::string>> newRecoveryCodes() {
  std::vector<std::string> out;
  for (size_t i = 0; i < kRecoveryCodeCount; ++i) {
    auto bytes = randomBytes(7);  // 56 bits; 10 base32 letters carry 50 of them
    if (!bytes) return bytes.error();
    std::string letters = base32Encode(*bytes).substr(0, 10);
    for (auto& c : letters) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.push_back(letters.substr(0, 5) + "-" + letters.substr(5));
  }
  return out;
}

std::string recoveryCodeHash(std::string_view code) {
  std::string letters;
  for (char c : code) {
    if (c == '-' || c == ' ') continue;
    letters += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return sha256Hex(letters);
}

}  // namespace ductus::api
