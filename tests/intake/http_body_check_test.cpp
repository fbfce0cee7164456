// What a queue-mode HTTP source refuses before storing: a body the
// interface's format can't read (415 by its Content-Type, 400 by its bytes).
#include "intake/http_body_check.h"

#include <gtest/gtest.h>

namespace ductus::intake {
namespace {

using config::Format;

net::HttpRequest post(std::string body, std::optional<std::string> contentType) {
  net::HttpRequest r;
  r.method = "POST";
  r.path = "/in";
  r.body = std::move(body);
  if (contentType) r.headers.emplace_back("content-type", *contentType);
  return r;
}

int statusOf(Format f, std::string body, std::optional<std::string> type) {
  auto refused = refuseBody(f, post(std::move(body), std::move(type)));
  return refused ? refused->status : 0;
}

TEST(HttpBodyCheck, AContentTypeTheFormatCannotReadIs415) {
  EXPECT_EQ(statusOf(Format::Json, "{}", "image/png"), 415);
  EXPECT_EQ(statusOf(Format::Json, "a=1", "application/x-www-form-urlencoded"), 415);
  EXPECT_EQ(statusOf(Format::Hl7v2, "MSH|^~\\&|A\r", "application/pdf"), 415);
  EXPECT_EQ(statusOf(Format::Csv, "a,b\n", "application/json"), 415);
  auto r = refuseBody(Format::Json, post("{}", "image/png"));
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("reads json, not image/png"), std::string::npos) << r->body;
}

TEST(HttpBodyCheck, TheFormatsOwnTypesAndUnlabelledBytesAreRead) {
  EXPECT_EQ(statusOf(Format::Json, "{}", "Application/JSON; charset=utf-8"), 0);
  EXPECT_EQ(statusOf(Format::Json, "{}", "application/fhir+json"), 0);
  EXPECT_EQ(statusOf(Format::Json, "{}", std::nullopt), 0);
  EXPECT_EQ(statusOf(Format::Json, "{}", "application/octet-stream"), 0);
  EXPECT_EQ(statusOf(Format::Hl7v2, "MSH|^~\\&|A\r", "x-application/hl7-v2+er7"), 0);
  EXPECT_EQ(statusOf(Format::Csv, "a,b\n", "application/vnd.ms-excel"), 0);
  EXPECT_EQ(statusOf(Format::Xml, "<a/>", "application/fhir+xml"), 0);
  EXPECT_EQ(statusOf(Format::Text, "{}", "application/json"), 0);  // text reads any text
}

TEST(HttpBodyCheck, JsonThatIsNotJsonIs400AndSaysWhere) {
  auto r = refuseBody(Format::Json, post("{not json", "application/json"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("line 1, column 3"), std::string::npos) << r->body;
  // ISO-8859-1 inside a string and a byte order mark are still JSON here.
  EXPECT_EQ(statusOf(Format::Json, "{\"name\":\"M\xfcller\"}", "application/json"), 0);
  EXPECT_EQ(statusOf(Format::Json, "\xef\xbb\xbf{\"a\":1}", "application/json"), 0);
}

TEST(HttpBodyCheck, JsonOverTheCheckedSizeIsLeftToTheTransform) {
  std::string big = "{\"x\":\"" + std::string(kMaxCheckedJsonBytes, 'a');  // unterminated
  EXPECT_EQ(statusOf(Format::Json, big, "application/json"), 0);
}

TEST(HttpBodyCheck, AnHl7BodyHoldingMllpFramingBytesIs400AndSaysWhy) {
  // An end block, then a start block: an MLLP destination would get two
  // messages, the second never stored.
  const std::string body =
      "MSH|^~\\&|A|B|C|D|||ADT^A01|OUTER1|P|2.5\rPID|1||M1\r\x1c\r"
      "\x0bMSH|^~\\&|EVIL|B|C|D|||ADT^A01|INJECTED1|P|2.5\rPID|1||VICTIM\r";
  auto r = refuseBody(Format::Hl7v2, post(body, "text/plain"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("contains MLLP framing bytes (0x1C"), std::string::npos) << r->body;
  EXPECT_EQ(statusOf(Format::Hl7v2, "\x0bMSH|^~\\&|A|B\rPID|1\r", "text/plain"), 400);
  EXPECT_EQ(statusOf(Format::Hl7v2, "MSH|^~\\&|A|B\rPID|1|\x0b|x\r", "text/plain"), 400);
  EXPECT_EQ(statusOf(Format::Hl7v2, "MSH|^~\\&|A|B\rPID|1\r\x1c\r", "text/plain"), 400);
}

TEST(HttpBodyCheck, AnHl7BodyWithoutMshIs400) {
  EXPECT_EQ(statusOf(Format::Hl7v2, "PID|1||x\r", "text/plain"), 400);
  EXPECT_EQ(statusOf(Format::Hl7v2, "\xef\xbb\xbfMSH|^~\\&|A|B\rPID|1\r", "text/plain"), 0);
  EXPECT_EQ(statusOf(Format::Hl7v2, "MSH|^~\\&|A|B\rPID|1\r", "text/plain"), 0);
}

}  // namespace
}  // namespace ductus::intake
