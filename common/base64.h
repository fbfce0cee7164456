// Base64 (RFC 4648, with padding), as secrets files and SSH host keys write
// it. One copy, so the secrets file and the sftp: host_key check cannot
// disagree on what is valid.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace ductus {

std::string base64Encode(std::string_view bytes);
// Fails ("not base64") on a length that is not a multiple of 4 or a
// character outside the alphabet; no whitespace is skipped.
Result<std::string> base64Decode(std::string_view text);

// base64url without padding (RFC 4648 section 5), as JOSE (JWS, JWK) and
// PKCE write it. Decoding refuses padding, whitespace and the other
// alphabet's + and /.
std::string base64UrlEncode(std::string_view bytes);
Result<std::string> base64UrlDecode(std::string_view text);

}  // namespace ductus
