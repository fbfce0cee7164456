// SHA-256 of some bytes, as 64 lowercase hex digits (OpenSSL's EVP).
#pragma once

#include <string>
#include <string_view>

namespace ductus {

std::string sha256Hex(std::string_view bytes);

}  // namespace ductus
