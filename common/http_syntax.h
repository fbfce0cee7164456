// HTTP syntax checks shared by everything that writes HTTP built by
// interface code: the HTTP destination, scripts' fetch(), and respond-mode
// answers. Each refuses anything that could inject a line.
#pragma once

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>

#include "common/text.h"

namespace ductus {

// An HTTP token (RFC 9110 tchar): what a method or header name may be.
inline bool isHttpToken(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// A header value without CR, LF or NUL.
inline bool isHttpHeaderValue(std::string_view s) {
  return std::none_of(s.begin(), s.end(),
                      [](unsigned char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

// Why a header that interface code set may not be written, or nullopt when
// it may: a name that is not a token, a value with a line break, or one of
// the headers the engine writes itself (framing and connection handling,
// which a script could otherwise use to smuggle a second message).
inline std::optional<std::string> scriptHeaderRefusal(std::string_view name,
                                                      std::string_view value) {
  if (!isHttpToken(name)) return "\"" + std::string(name) + "\" is not an HTTP header name";
  if (!isHttpHeaderValue(value))
    return "header " + std::string(name) + ": a value may not contain line breaks";
  std::string l = asciiLower(name);
  if (l == "host" || l == "content-length" || l == "transfer-encoding" || l == "connection")
    return "header " + std::string(name) + " is set by the engine, not by scripts";
  return std::nullopt;
}

}  // namespace ductus
