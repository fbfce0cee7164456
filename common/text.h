// Bytes from outside (HL7 fields, HTTP bodies) as text for places that only
// take UTF-8: JSON, PostgreSQL text columns. Healthcare systems still send
// ISO-8859-1, often without saying so (MSH-18 empty): bytes that are not
// UTF-8 are read as ISO-8859-1, each byte one character, so nothing is lost
// or replaced and the same bytes always give the same text.
#pragma once

#include <string>
#include <string_view>

namespace ductus {

// Well-formed UTF-8: no overlong forms, surrogates or values past U+10FFFF.
bool isUtf8(std::string_view s);

// UTF-8 as it is; anything else read as ISO-8859-1.
std::string asText(std::string_view bytes);

// Each byte one ISO-8859-1 character, written in UTF-8 (for text known to
// be ISO-8859-1, whatever UTF-8 its bytes may also happen to spell).
std::string latin1AsUtf8(std::string_view bytes);

// ASCII letters lowered, other bytes as they are: HTTP header names and
// media types, URL schemes, cron's month and day names.
std::string asciiLower(std::string_view s);

// asText for a PostgreSQL text column, which refuses NUL: each NUL is
// written as \X00\ (HL7's hex escape for that byte).
std::string asDatabaseText(std::string_view bytes);

// Every byte but RFC 3986's unreserved (letters, digits, -._~) as %XX:
// a value safe in a URL's path, query or label.
std::string percentEncode(std::string_view s);

}  // namespace ductus
