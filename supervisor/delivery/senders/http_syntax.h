// HTTP syntax checks shared by the HTTP destination and scripts' fetch():
// both send requests whose method and headers come from interface code, so
// both refuse anything that could inject a line.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace ductus::senders {

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

}  // namespace ductus::senders
