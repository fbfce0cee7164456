// Host names, addresses, "host:port" and URLs as written in project files.
#pragma once

#include <optional>
#include <string_view>

#include "common/config/model.h"

namespace ductus::config {

// A DNS name (RFC 1123 labels), an IPv4 address or an IPv6 address.
bool isValidHost(std::string_view host);
bool isIpv4(std::string_view s);
bool isIpv6(std::string_view s);

// "127.0.0.1:2575", "0.0.0.0:80", "[::1]:8080", "lab.example:2575". The
// port must be 1-65535.
std::optional<HostPort> parseHostPort(std::string_view text);

// http:// or https:// followed by a valid host (and optional port and path).
bool isValidHttpUrl(std::string_view url);

// Whether two listeners would collide: same port and the same host, or
// either one on every address (0.0.0.0 / ::).
bool sameListenAddress(const HostPort& a, const HostPort& b);

}  // namespace ductus::config
