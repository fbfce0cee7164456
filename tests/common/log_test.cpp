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

TEST(Logging, ParseLogFormatRefusesUnknownNames) {
  LogFormat f;
  EXPECT_TRUE(parseLogFormat("json", f));
  EXPECT_EQ(f, LogFormat::Json);
  EXPECT_TRUE(parseLogFormat("text", f));
  EXPECT_FALSE(parseLogFormat("xml", f));
}

}  // namespace
}  // namespace ductus
