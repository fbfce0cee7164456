#include "supervisor/services/sqlserver/row_json.h"

#include <sql.h>
#include <sqlext.h>

#include <cctype>
#include <nlohmann/json.hpp>

#include "common/text.h"

namespace ductus::supervisor::services::sqlserver {
namespace {

// SQL Server's own types as FreeTDS reports them (msodbcsql's sqlncli.h
// values; unixODBC's headers don't have them).
constexpr int kSsTime2 = -154;
constexpr int kSsTimestampOffset = -155;

void appendString(std::string& json, std::string_view s) {
  json += nlohmann::json(asText(std::string(s))).dump();
}

// A JSON number: -?digits[.digits][e[+-]digits], no leading zeros (0.5 is,
// 05 isn't), nothing else.
bool isJsonNumber(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  if (s[i] == '0' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))
    return false;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  }
  return i == s.size();
}

// The driver may write ".5" or "-.5" for a decimal below one, and "1." ;
// JSON wants "0.5" and "1".
std::string normalNumber(std::string_view s) {
  std::string out(s);
  size_t sign = !out.empty() && out[0] == '-' ? 1 : 0;
  if (out.size() > sign && out[sign] == '.') out.insert(sign, "0");
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

// "03:04:05.1234500" → "03:04:05.12345"; "03:04:05.0000000" → "03:04:05".
std::string trimFraction(std::string_view time) {
  std::string out(time);
  size_t dot = out.find('.');
  if (dot == std::string::npos) return out;
  size_t end = out.size();
  while (end > dot + 1 && out[end - 1] == '0') --end;
  if (end == dot + 1) end = dot;
  out.erase(end);
  return out;
}

}  // namespace

ValueKind valueKindOf(int t) {
  switch (t) {
    case SQL_TINYINT:
    case SQL_SMALLINT:
    case SQL_INTEGER:
    case SQL_BIGINT:
    case SQL_DECIMAL:
    case SQL_NUMERIC:
    case SQL_REAL:
    case SQL_FLOAT:
    case SQL_DOUBLE:
      return ValueKind::Number;
    case SQL_BIT:
      return ValueKind::Boolean;
    case SQL_TYPE_DATE:
    case SQL_DATE:
      return ValueKind::Date;
    case SQL_TYPE_TIME:
    case SQL_TIME:
    case kSsTime2:
      return ValueKind::Time;
    case SQL_TYPE_TIMESTAMP:
    case SQL_TIMESTAMP:
      return ValueKind::Timestamp;
    case kSsTimestampOffset:
      return ValueKind::TimestampOffset;
    case SQL_BINARY:
    case SQL_VARBINARY:
    case SQL_LONGVARBINARY:
      return ValueKind::Binary;
    case SQL_GUID:
      return ValueKind::Guid;
    default:
      return ValueKind::Text;
  }
}

void appendJsonValue(std::string& json, ValueKind kind, std::string_view v) {
  switch (kind) {
    case ValueKind::Number: {
      std::string n = normalNumber(v);
      if (isJsonNumber(n))
        json += n;
      else
        appendString(json, v);  // never invalid JSON, whatever the driver wrote
      return;
    }
    case ValueKind::Boolean:
      json += v == "1" || v == "true" ? "true" : "false";
      return;
    case ValueKind::Date:
      appendString(json, v);
      return;
    case ValueKind::Time:
      appendString(json, trimFraction(v));
      return;
    case ValueKind::Timestamp:
    case ValueKind::TimestampOffset: {
      // "2024-01-02 03:04:05.1234567 +05:30" → "2024-01-02T03:04:05.1234567+05:30"
      std::string s(v);
      std::string offset;
      if (kind == ValueKind::TimestampOffset) {
        size_t sp = s.rfind(' ');
        if (sp != std::string::npos && sp > 10) {
          offset = s.substr(sp + 1);
          s.erase(sp);
        }
      }
      size_t sp = s.find(' ');
      std::string date = sp == std::string::npos ? s : s.substr(0, sp);
      std::string time = sp == std::string::npos ? "" : trimFraction(s.substr(sp + 1));
      appendString(json, date + (time.empty() ? "" : "T" + time) + offset);
      return;
    }
    case ValueKind::Binary: {
      static const char* hex = "0123456789abcdef";
      std::string s = "\\x";
      s.reserve(2 + v.size() * 2);
      for (unsigned char c : v) {
        s.push_back(hex[c >> 4]);
        s.push_back(hex[c & 15]);
      }
      appendString(json, s);
      return;
    }
    case ValueKind::Guid: {
      std::string s(v);
      for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      appendString(json, s);
      return;
    }
    case ValueKind::Text:
      appendString(json, v);
      return;
  }
}

std::string columnKey(std::string_view name, size_t index) {
  std::string key = name.empty() ? "column" + std::to_string(index) : std::string(name);
  return nlohmann::json(asText(key)).dump();
}

}  // namespace ductus::supervisor::services::sqlserver
