// A SQL Server value as db() gives it to a script: the same JSON a
// PostgreSQL row gives (row_to_json). Numbers as the server wrote them
// (bigint and decimal keep every digit), bit as true/false, times in ISO
// 8601 with a T and without trailing zeros of the fraction, a
// datetimeoffset with its offset, binary as "\x0a0b" hex, GUIDs upper-case,
// text as text, NULL as null. Pure: the driver's text in, JSON out.
#pragma once

#include <string>
#include <string_view>

namespace ductus::supervisor::services::sqlserver {

// How a column's values are read and written, from its ODBC SQL type.
enum class ValueKind {
  Number,
  Boolean,
  Date,
  Time,
  Timestamp,
  TimestampOffset,
  Binary,
  Guid,
  Text
};

ValueKind valueKindOf(int odbcSqlType);

// Appends the value (the driver's SQL_C_CHAR text; raw bytes for Binary)
// as JSON. A number the driver wrote in a form JSON can't hold is written
// as a string.
void appendJsonValue(std::string& json, ValueKind kind, std::string_view value);

// A column's name as a JSON key: its own, or "column<n>" (1-based) when
// the statement gave it none.
std::string columnKey(std::string_view name, size_t index);

}  // namespace ductus::supervisor::services::sqlserver
