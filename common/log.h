// Logging setup: spdlog to stderr, as text or as JSON lines
// (--log-format json) for journald and log shippers.
//
// A line about one interface, destination or message is logged with
// logWith() and its LogFields: the JSON format writes them as fields of
// their own ("interface", "destination", "message": the id, and any more a
// summary carries), so a log shipper finds every line about a message
// without reading the words; the text format leaves them to the words,
// which name them already. Other lines use spdlog's calls as before.
#pragma once

#include <spdlog/spdlog.h>

#include <cstdint>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

// fmt's formatting core, vformat_to<char> (every type's writer: integers
// to 128 bits, floats with dragonbox and its fallback), is instantiated by
// each translation unit that logs through spdlog (its logger calls it
// directly), although libfmt.so exports it: about 4 s of a unit's compile
// at -O3, in 31 of a unity build's 125 units. Declared an explicit
// instantiation here, it is libfmt's copy that every unit calls. Only for
// the fmt this was checked against (Debian 12's 9.1, shared) and with GCC,
// which built it: clang mangles this signature's dependent type
// differently and would not find libfmt's copy (the Debug build and
// scripts/fuzz.sh's, both clang's, instantiate it in each unit).
// Elsewhere it compiles as before. So files log with this header, not
// <spdlog/spdlog.h>.
#if defined(FMT_VERSION) && FMT_VERSION >= 90000 && FMT_VERSION < 100000 && \
    defined(FMT_SHARED) && !defined(FMT_HEADER_ONLY) && !defined(__clang__)
FMT_BEGIN_NAMESPACE
namespace detail {
extern template void vformat_to<char>(buffer<char>&, basic_string_view<char>,
                                      basic_format_args<buffer_context<char>>, locale_ref);
}  // namespace detail
FMT_END_NAMESPACE
#endif

namespace ductus {

enum class LogFormat { Text, Json };

// Installs the default logger. Safe to call again (replaces it).
void setupLogging(LogFormat format, spdlog::level::level_enum level = spdlog::level::info);

// Parses "text" / "json"; false for anything else.
bool parseLogFormat(std::string_view s, LogFormat& out);

// Parses "debug" / "info" / "warn" / "error"; false for anything else.
bool parseLogLevel(std::string_view s, spdlog::level::level_enum& out);

// A field of its own in a JSON line: a count or a text. Views: the line is
// written before logWith() returns.
struct LogField {
  std::string_view name;
  std::variant<int64_t, std::string_view> value;
};

// What a line is about. Empty parts are left out of the line.
struct LogFields {
  std::string_view interface{};
  std::string_view destination{};
  int64_t message = 0;  // the message's id; 0: not about one message
  std::vector<LogField> more{};
};

namespace detail {
// The fields of the line being written on this thread, for the JSON format
// (spdlog's log_msg has no room for them; it formats on the caller's thread).
class FieldsScope {
 public:
  explicit FieldsScope(const LogFields& fields);
  ~FieldsScope();
  FieldsScope(const FieldsScope&) = delete;
  FieldsScope& operator=(const FieldsScope&) = delete;

 private:
  const LogFields* outer_;
};
}  // namespace detail

// spdlog::log with fields. Nothing is formatted below the logger's level.
template <typename... Args>
void logWith(spdlog::level::level_enum level, const LogFields& fields,
             spdlog::format_string_t<Args...> fmt, Args&&... args) {
  auto* logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;
  detail::FieldsScope scope(fields);
  logger->log(level, fmt, std::forward<Args>(args)...);
}

// A line a person reads as it stands (a config error's
// "file:line:column: key: message"): written as is, without time or level,
// under the text format, and as a JSON line with its fields under json.
void logPlain(spdlog::level::level_enum level, std::string_view text, const LogFields& fields = {});

}  // namespace ductus
