#include "common/config/address.h"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>
#include <string>

namespace ductus::config {

bool isIpv4(std::string_view s) {
  in_addr a;
  return inet_pton(AF_INET, std::string(s).c_str(), &a) == 1;
}

bool isIpv6(std::string_view s) {
  in6_addr a;
  return inet_pton(AF_INET6, std::string(s).c_str(), &a) == 1;
}

namespace {

bool isDnsName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t dot = s.find('.', start);
    std::string_view label = s.substr(start, dot == s.npos ? s.npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char c : label)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) return false;
    if (dot == s.npos) break;
    start = dot + 1;
  }
  return true;
}

std::optional<uint16_t> parsePort(std::string_view s) {
  unsigned v = 0;
  if (s.empty() || s.size() > 5) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v == 0 || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

bool isWildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

}  // namespace

std::string HostPort::toString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

bool isValidHost(std::string_view host) { return isIpv4(host) || isIpv6(host) || isDnsName(host); }

std::optional<HostPort> parseHostPort(std::string_view text) {
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == text.npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    if (!isIpv6(host)) return std::nullopt;
  } else {
    size_t colon = text.rfind(':');
    if (colon == text.npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (!isIpv4(host) && !isDnsName(host)) return std::nullopt;
  }
  auto p = parsePort(port);
  if (!p) return std::nullopt;
  return HostPort{std::string(host), *p};
}

bool isValidHttpUrl(std::string_view url) {
  std::string_view rest;
  if (url.substr(0, 7) == "http://") rest = url.substr(7);
  else if (url.substr(0, 8) == "https://") rest = url.substr(8);
  else return false;
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = authority.rfind('@'); at != authority.npos) authority = authority.substr(at + 1);
  if (authority.empty()) return false;
  if (authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == authority.npos || !isIpv6(authority.substr(1, close - 1))) return false;
    std::string_view after = authority.substr(close + 1);
    return after.empty() || (after.front() == ':' && parsePort(after.substr(1)));
  }
  size_t colon = authority.find(':');
  if (colon != authority.npos && !parsePort(authority.substr(colon + 1))) return false;
  return isValidHost(authority.substr(0, colon));
}

bool sameListenAddress(const HostPort& a, const HostPort& b) {
  if (a.port != b.port) return false;
  return a.host == b.host || isWildcard(a.host) || isWildcard(b.host);
}

}  // namespace ductus::config
