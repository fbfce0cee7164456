#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <utility>

#include "common/text.h"

namespace ductus {
namespace {

thread_local const LogFields* currentFields = nullptr;
LogFormat currentFormat = LogFormat::Text;

void addFields(nlohmann::json& j, const LogFields& f) {
  if (!f.interface.empty()) j["interface"] = asText(f.interface);
  if (!f.destination.empty()) j["destination"] = asText(f.destination);
  if (f.message != 0) j["message"] = f.message;
  for (const auto& m : f.more) {
    std::string name(m.name);
    if (const auto* n = std::get_if<int64_t>(&m.value))
      j[name] = *n;
    else
      j[name] = asText(std::get<std::string_view>(m.value));
  }
}

// One JSON object per line: {"ts","level","logger","msg"} and the line's
// fields (logWith). The message is escaped by nlohmann, so a log line can
// never break the framing.
class JsonFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    nlohmann::json j;
    auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(
                    msg.time.time_since_epoch())
                    .count();
    j["ts"] = secs / 1000.0;
    j["level"] = spdlog::level::to_string_view(msg.level).data();
    j["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
    // ISO-8859-1 from another system kept as its characters, not replaced.
    j["msg"] = asText(std::string_view(msg.payload.data(), msg.payload.size()));
    if (currentFields) addFields(j, *currentFields);
    auto s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonFlag>();
  }
};

// The text format's message: one event, one line, in UTF-8, whatever a
// remote system put in it (an ACK's MSA-3, an HTTP body, a file name).
// Control characters are written as \xNN, so a CR or LF in them can't
// forge a line of its own and an escape sequence can't drive the terminal.
class TextMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string text = asText(std::string_view(msg.payload.data(), msg.payload.size()));
    static const char* digits = "0123456789abcdef";
    for (unsigned char c : text) {
      if (c < 0x20 || c == 0x7f) {
        const char esc[4] = {'\\', 'x', digits[c >> 4], digits[c & 15]};
        dest.append(esc, esc + 4);
      } else {
        dest.push_back(static_cast<char>(c));
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<TextMessageFlag>();
  }
};

}  // namespace

void setupLogging(LogFormat format, spdlog::level::level_enum level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("ductus", sink);
  if (format == LogFormat::Json) {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<JsonFlag>('*').set_pattern("%*");
    logger->set_formatter(std::move(f));
  } else {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<TextMessageFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %*");
    logger->set_formatter(std::move(f));
  }
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  currentFormat = format;
}

bool parseLogFormat(std::string_view s, LogFormat& out) {
  if (s == "text") {
    out = LogFormat::Text;
    return true;
  }
  if (s == "json") {
    out = LogFormat::Json;
    return true;
  }
  return false;
}

bool parseLogLevel(std::string_view s, spdlog::level::level_enum& out) {
  using spdlog::level::level_enum;
  static constexpr std::pair<std::string_view, level_enum> kLevels[] = {
      {"debug", level_enum::debug},
      {"info", level_enum::info},
      {"warn", level_enum::warn},
      {"error", level_enum::err}};
  for (const auto& [name, level] : kLevels)
    if (s == name) {
      out = level;
      return true;
    }
  return false;
}

namespace detail {
FieldsScope::FieldsScope(const LogFields& fields) : outer_(currentFields) {
  currentFields = &fields;
}
FieldsScope::~FieldsScope() { currentFields = outer_; }
}  // namespace detail

void logPlain(spdlog::level::level_enum level, std::string_view text, const LogFields& fields) {
  if (currentFormat == LogFormat::Json) return logWith(level, fields, "{}", text);
  if (!spdlog::default_logger_raw()->should_log(level)) return;
  spdlog::default_logger_raw()->flush();  // after the lines logged before it
  std::string line = asText(text);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace ductus
