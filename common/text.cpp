#include "common/text.h"

#include <cstdint>

namespace ductus {

bool isUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t more;  // continuation bytes after the lead byte
    uint32_t cp;
    if (c < 0x80)
      more = 0, cp = c;
    else if ((c >> 5) == 0x6)
      more = 1, cp = c & 0x1F;
    else if ((c >> 4) == 0xE)
      more = 2, cp = c & 0x0F;
    else if ((c >> 3) == 0x1E)
      more = 3, cp = c & 0x07;
    else
      return false;
    if (s.size() - i <= more) return false;
    for (size_t k = 1; k <= more; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((more == 1 && cp < 0x80) || (more == 2 && cp < 0x800) || (more == 3 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return false;
    i += more + 1;
  }
  return true;
}

std::string asText(std::string_view bytes) {
  if (isUtf8(bytes)) return std::string(bytes);
  return latin1AsUtf8(bytes);
}

std::string latin1AsUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

std::string asciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string asDatabaseText(std::string_view bytes) {
  if (bytes.find('\0') == std::string_view::npos) return asText(bytes);
  std::string text;
  text.reserve(bytes.size() + 8);
  for (char c : bytes) {
    if (c == '\0')
      text += "\\X00\\";
    else
      text += c;
  }
  return asText(text);
}

std::string percentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace ductus
