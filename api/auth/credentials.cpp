#include "api/auth/credentials.h"

#include <openssl/rand.h>

#include <cstdint>

#include "common/sha256.h"

namespace ductus::api {
namespace {

Result<std::string> randomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1)
    return Error{"the system's random number generator failed"};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : buf) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

bool isLowerHex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Result<std::string> newToken() {
  auto hex = randomHex(32);
  if (!hex) return hex.error();
  return std::string(kTokenPrefix) + *hex;
}

Result<std::string> newSessionSecret() { return randomHex(32); }

Result<std::string> newPassword() {
  // 62 symbols; bytes >= 248 are drawn again so every symbol is equally likely.
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  while (out.size() < 24) {
    unsigned char buf[32];
    if (RAND_bytes(buf, sizeof buf) != 1)
      return Error{"the system's random number generator failed"};
    for (unsigned char c : buf)
      if (c < 248 && out.size() < 24) out.push_back(kAlphabet[c % 62]);
  }
  return out;
}

bool isTokenText(std::string_view s) {
  return s.size() == kTokenPrefix.size() + 64 && s.starts_with(kTokenPrefix) &&
         isLowerHex(s.substr(kTokenPrefix.size()));
}

bool isSessionSecretText(std::string_view s) { return s.size() == 64 && isLowerHex(s); }

std::string secretHash(std::string_view secret) { return sha256Hex(secret); }

bool isValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return false;
  for (char c : name)
    if (!alnum(c) && c != '.' && c != '_' && c != '@' && c != '-') return false;
  return true;
}

Result<unsigned> permissionsFromNames(const std::vector<std::string>& names) {
  unsigned bits = kNoPermission;
  for (auto& n : names) {
    if (n == "payloads") bits |= kPayloads;
    else if (n == "audit") bits |= kAudit;
    else return Error{"unknown permission '" + n + "' (there are: payloads, audit)"};
  }
  return bits;
}

Result<unsigned> permissionsFromList(std::string_view list) {
  std::vector<std::string> names;
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string item(list.substr(0, comma));
    while (!item.empty() && item.back() == ' ') item.pop_back();
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    if (!item.empty()) names.push_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return permissionsFromNames(names);
}

std::vector<std::string> permissionNames(unsigned bits) {
  std::vector<std::string> out;
  if (bits & kPayloads) out.push_back("payloads");
  if (bits & kAudit) out.push_back("audit");
  return out;
}

std::string permissionsArray(unsigned bits) {
  std::string out = "{";
  for (auto& n : permissionNames(bits)) {
    if (out.size() > 1) out += ',';
    out += n;
  }
  return out + "}";
}

std::string sessionCookieHeader(std::string_view secret, bool secure, const AuthPolicy& policy) {
  std::string v = std::string(kSessionCookie) + "=" + std::string(secret) +
                  "; Path=/api; HttpOnly; SameSite=Strict; Max-Age=" +
                  std::to_string(policy.sessionLifetime.count());
  if (secure) v += "; Secure";
  return v;
}

std::string clearSessionCookieHeader(bool secure) {
  std::string v = std::string(kSessionCookie) + "=; Path=/api; HttpOnly; SameSite=Strict; Max-Age=0";
  if (secure) v += "; Secure";
  return v;
}

std::string sessionCookieValue(std::string_view header) {
  return cookieValue(header, kSessionCookie);
}

std::string cookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    auto semi = header.find(';');
    auto pair = header.substr(0, semi);
    while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
    auto eq = pair.find('=');
    if (eq != std::string_view::npos && pair.substr(0, eq) == name) {
      auto value = pair.substr(eq + 1);
      while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
      return std::string(value);
    }
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return {};
}

bool isLoopbackHost(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace ductus::api
