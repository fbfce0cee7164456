#include "common/sftp/known_hosts.h"

#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>

#include "common/base64.h"

namespace ductus::sftp {
namespace {

// OpenSSH's wildcards: * any run, ? one character; nothing else is special
// ("[host]:port" is literal, unlike in fnmatch).
bool wildcardMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p, ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1, t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// Whether a known_hosts line's host field names `name`.
bool namesHost(std::string_view field, const std::string& name) {
  if (field.starts_with("|1|")) {
    auto bar = field.find('|', 3);
    if (bar == std::string_view::npos) return false;
    auto salt = base64Decode(field.substr(3, bar - 3));
    auto hash = base64Decode(field.substr(bar + 1));
    if (!salt || !hash) return false;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha1(), salt->data(), static_cast<int>(salt->size()),
         reinterpret_cast<const unsigned char*>(name.data()), name.size(), mac, &len);
    return hash->size() == len && std::memcmp(hash->data(), mac, len) == 0;
  }
  bool matched = false;
  size_t start = 0;
  while (start <= field.size()) {
    size_t comma = field.find(',', start);
    std::string_view pattern = field.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    bool negated = !pattern.empty() && pattern[0] == '!';
    if (negated) pattern.remove_prefix(1);
    if (!pattern.empty() && wildcardMatch(pattern, name)) {
      if (negated) return false;
      matched = true;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return matched;
}

// The words of a line, split on spaces and tabs.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    i = line.find_first_not_of(" \t\r", i);
    if (i == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t\r", i);
    if (end == std::string_view::npos) end = line.size();
    out.push_back(line.substr(i, end - i));
    i = end;
  }
  return out;
}

}  // namespace

std::string knownHostsName(const std::string& host, uint16_t port) {
  return port == 22 ? host : "[" + host + "]:" + std::to_string(port);
}

std::vector<std::string> knownHostKeys(std::string_view text, const std::string& host,
                                       uint16_t port) {
  std::string name = knownHostsName(host, port);
  std::vector<std::string> keys;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    auto w = words(text.substr(start, end - start));
    start = end + 1;
    if (w.size() < 3 || w[0].starts_with('#') || w[0].starts_with('@')) continue;
    if (namesHost(w[0], name)) keys.push_back(std::string(w[1]) + " " + std::string(w[2]));
  }
  return keys;
}

bool pinnedKeyMatches(const std::vector<std::string>& pinned, std::string_view type,
                      std::string_view blob) {
  for (const auto& p : pinned) {
    auto w = words(p);
    if (w.size() < 2 || w[0] != type) continue;
    auto bytes = base64Decode(w[1]);
    if (bytes && *bytes == blob) return true;
  }
  return false;
}

std::string fingerprint(std::string_view blob) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(blob.data()), blob.size(), digest);
  std::string b64 =
      base64Encode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "SHA256:" + b64;
}

std::vector<std::string> pinnedKeyTypes(const std::vector<std::string>& pinned) {
  std::vector<std::string> out;
  for (const auto& p : pinned) {
    auto w = words(p);
    if (!w.empty() && std::find(out.begin(), out.end(), w[0]) == out.end()) out.emplace_back(w[0]);
  }
  return out;
}

}  // namespace ductus::sftp
