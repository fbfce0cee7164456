// Values as the monitor's store files (activity_store, alert_store,
// queue_probes) pass them as text parameters and read them back: moments as
// microseconds since the epoch (exact both ways, no time zone or DateStyle
// in between), and one-dimensional array literals with NULL elements, so a
// batch of any size is one parameter that unnest() takes apart.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/text.h"
#include "schema/pg_connection.h"
#include "schema/pg_result.h"

namespace ductus::store::pgvalue {

using Moment = std::chrono::system_clock::time_point;

// SQL turning a text parameter or column of microseconds into a
// timestamptz (NULL stays NULL), and back.
inline std::string momentSql(const std::string& micros) {
  return "('epoch'::timestamptz + (" + micros + ")::int8 * interval '1 microsecond')";
}
inline std::string microsSql(const std::string& timestamptz) {
  return "(extract(epoch FROM " + timestamptz + ") * 1000000)::int8";
}

inline int64_t micros(Moment t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}
inline Param momentParam(std::optional<Moment> t) {
  if (!t) return std::nullopt;
  return std::to_string(micros(*t));
}
// A column selected through microsSql; nullopt when NULL.
inline std::optional<Moment> momentAt(const PgResult& r, int row, int col) {
  if (r.isNull(row, col)) return std::nullopt;
  return Moment(
      std::chrono::duration_cast<Moment::duration>(std::chrono::microseconds(r.integer(row, col))));
}

// {"a",NULL,"b\"c"}: every element quoted (so any text, empty included,
// reads back as itself), nullopt as NULL.
inline std::string arrayLiteral(const std::vector<Param>& items) {
  std::string s = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ',';
    if (!items[i]) {
      s += "NULL";
      continue;
    }
    s += '"';
    for (char c : *items[i]) {
      if (c == '"' || c == '\\') s += '\\';
      s += c;
    }
    s += '"';
  }
  return s + "}";
}

// A peer's words (an error's text) as a bounded text column: database
// text (common/text.h), cut to at most `max` bytes at a character's start.
inline std::string boundedText(std::string_view raw, size_t max) {
  std::string t = asDatabaseText(raw);
  if (t.size() <= max) return t;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) --cut;
  return t.substr(0, cut);
}

}  // namespace ductus::store::pgvalue
