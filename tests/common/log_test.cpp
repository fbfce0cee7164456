#include "common/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace ductus {
namespace {

// Captures what the default logger writes to stderr.
std::string captureStderr(void (*fn)()) {
  std::fflush(stderr);
  int saved = dup(2);
  FILE* tmp = std::tmpfile();
  dup2(fileno(tmp), 2);
  fn();
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(tmp);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) out.append(buf, n);
  std::fclose(tmp);
  return out;
}

TEST(Logging, JsonFormatWritesOneParseableObjectPerLine) {
  auto out = captureStderr([] {
    setupLogging(LogFormat::Json);
    spdlog::info("listener up on {} with \"quotes\"\nand a newline", "127.0.0.1:2575");
  });
  setupLogging(LogFormat::Text);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out.back(), '\n');
  auto j = nlohmann::json::parse(out.substr(0, out.size() - 1));
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(j["msg"], "listener up on 127.0.0.1:2575 with \"quotes\"\nand a newline");
  EXPECT_TRUE(j["ts"].is_number());
}

TEST(Logging, TextFormatKeepsAnEventOnOneLineInUtf8) {
  // A receiver's answer with ISO-8859-1, a forged line and a terminal escape.
  auto out = captureStderr([] {
    setupLogging(LogFormat::Text);
    spdlog::warn("AE: {}", "ung\xfcltig\r\n2026-01-01T00:00:00.000 info forged\x1b[2J");
  });
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // one line
  EXPECT_NE(out.find("AE: ung\xc3\xbcltig\\x0d\\x0a2026-01-01T00:00:00.000 info forged\\x1b[2J"),
            std::string::npos)
      << out;
}

TEST(Logging, JsonFormatKeepsIsoLatin1AsItsCharacters) {
  auto out = captureStderr([] {
    setupLogging(LogFormat::Json);
    spdlog::info("AE: {}", "ung\xfcltig");
  });
  setupLogging(LogFormat::Text);
  auto j = nlohmann::json::parse(out.substr(0, out.size() - 1));
  EXPECT_EQ(j["msg"], "AE: ung\xc3\xbcltig");
}

TEST(Logging, JsonLinesCarryWhatTheyAreAboutAsFieldsOfTheirOwn) {
  auto out = captureStderr([] {
    setupLogging(LogFormat::Json);
    logWith(spdlog::level::warn,
            LogFields{"adt-feed", "lab", 42, {{"attempts", int64_t{3}}, {"reason", "HTTP 404"}}},
            "adt-feed/lab: message {} quarantined", 42);
    spdlog::info("a line about nothing in particular");
  });
  setupLogging(LogFormat::Text);
  auto nl = out.find('\n');
  ASSERT_NE(nl, std::string::npos) << out;
  auto about = nlohmann::json::parse(out.substr(0, nl));
  EXPECT_EQ(about["interface"], "adt-feed");
  EXPECT_EQ(about["destination"], "lab");
  EXPECT_EQ(about["message"], 42);
  EXPECT_EQ(about["attempts"], 3);
  EXPECT_EQ(about["reason"], "HTTP 404");
  EXPECT_EQ(about["msg"], "adt-feed/lab: message 42 quarantined");
  // The fields belong to their line only.
  auto next = nlohmann::json::parse(out.substr(nl + 1, out.size() - nl - 2));
  EXPECT_FALSE(next.contains("interface")) << next.dump();
  EXPECT_FALSE(next.contains("message")) << next.dump();
}

TEST(Logging, TextLinesAreTheWordsAloneWithOrWithoutFields) {
  auto out = captureStderr([] {
    setupLogging(LogFormat::Text);
    logWith(spdlog::level::info, LogFields{"adt-feed", "lab", 42, {}}, "message {} sent", 42);
  });
  EXPECT_NE(out.find(" info message 42 sent\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("adt-feed"), std::string::npos) << out;
}

TEST(Logging, TheLevelLeavesOutWhatIsBelowIt) {
  auto out = captureStderr([] {
    setupLogging(LogFormat::Text, spdlog::level::warn);
    logWith(spdlog::level::debug, LogFields{"a", "b", 1, {}}, "debug {}", 1);
    spdlog::info("info");
    logWith(spdlog::level::warn, LogFields{"a", "b", 1, {}}, "warn {}", 1);
  });
  setupLogging(LogFormat::Text);
  EXPECT_EQ(out.find("debug 1"), std::string::npos) << out;
  EXPECT_EQ(out.find(" info\n"), std::string::npos) << out;
  EXPECT_NE(out.find("warn 1"), std::string::npos) << out;
}

TEST(Logging, PlainLinesAreAsWrittenInTextAndJsonObjectsInJson) {
  auto text = captureStderr([] {
    setupLogging(LogFormat::Text);
    logPlain(spdlog::level::err, "ductus.yaml:3:5: engine.heap_mb: expected a number",
             {.more = {{"file", "ductus.yaml"}, {"line", int64_t{3}}}});
  });
  EXPECT_EQ(text, "ductus.yaml:3:5: engine.heap_mb: expected a number\n");
  auto json = captureStderr([] {
    setupLogging(LogFormat::Json);
    logPlain(spdlog::level::err, "ductus.yaml:3:5: engine.heap_mb: expected a number",
             {.more = {{"file", "ductus.yaml"}, {"line", int64_t{3}}}});
  });
  setupLogging(LogFormat::Text);
  ASSERT_FALSE(json.empty());
  auto j = nlohmann::json::parse(json.substr(0, json.size() - 1));
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["msg"], "ductus.yaml:3:5: engine.heap_mb: expected a number");
  EXPECT_EQ(j["file"], "ductus.yaml");
  EXPECT_EQ(j["line"], 3);
}

TEST(Logging, ParseLogLevelKnowsTheFourLevels) {
  spdlog::level::level_enum l = spdlog::level::off;
  EXPECT_TRUE(parseLogLevel("debug", l));
  EXPECT_EQ(l, spdlog::level::debug);
  EXPECT_TRUE(parseLogLevel("info", l));
  EXPECT_EQ(l, spdlog::level::info);
  EXPECT_TRUE(parseLogLevel("warn", l));
  EXPECT_EQ(l, spdlog::level::warn);
  EXPECT_TRUE(parseLogLevel("error", l));
  EXPECT_EQ(l, spdlog::level::err);
  EXPECT_FALSE(parseLogLevel("verbose", l));
  EXPECT_FALSE(parseLogLevel("", l));
  EXPECT_FALSE(parseLogLevel("DEBUG", l));
}

TEST(Logging, ParseLogFormatRefusesUnknownNames) {
  LogFormat f;
  EXPECT_TRUE(parseLogFormat("json", f));
  EXPECT_EQ(f, LogFormat::Json);
  EXPECT_TRUE(parseLogFormat("text", f));
  EXPECT_FALSE(parseLogFormat("xml", f));
}

}  // namespace
}  // namespace ductus
