#include "common/base64.h"

#include <openssl/evp.h>

namespace ductus {

std::string base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(n);
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return Error{"not base64"};
  std::string out(3 * text.size() / 4 + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return Error{"not base64"};
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string base64UrlEncode(std::string_view bytes) {
  std::string out = base64Encode(bytes);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

Result<std::string> base64UrlDecode(std::string_view text) {
  if (text.size() % 4 == 1) return Error{"not base64url"};
  std::string standard(text);
  for (char& c : standard) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (c == '-')
      c = '+';
    else if (c == '_')
      c = '/';
    else if (!plain)
      return Error{"not base64url"};
  }
  standard.append((4 - standard.size() % 4) % 4, '=');
  auto r = base64Decode(standard);
  if (!r) return Error{"not base64url"};
  return r;
}

}  // namespace ductus
