#include "common/monitor/alert_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace ductus::monitor {
namespace {

// 2026-06-01T12:00:00Z
const TimePoint kT0 = Clock::from_time_t(1780315200);

AlertState stalled() {
  AlertState a;
  a.id = 42;
  a.subject = {"adt-in", "lab", ""};
  a.phase = Phase::Firing;
  a.state = State::Stalled;
  a.severity = Severity::Critical;
  a.openedAt = kT0 - std::chrono::minutes(5);
  a.changedAt = kT0;
  return a;
}

Notification composed(NotificationKind kind, WebhookFormat f, const std::string& reason,
                      const AlertState& a = stalled()) {
  Notification n;
  n.kind = kind;
  n.channel = "oncall";
  compose(n, a, reason, f, "eng1.example.org");
  return n;
}

TEST(AlertText, SubjectSaysSeverityWhatAndState) {
  struct Row {
    NotificationKind kind;
    const char* subject;
  } rows[] = {
      {NotificationKind::Fired, "[CRITICAL] adt-in/lab is stalled"},
      {NotificationKind::Escalated, "[CRITICAL] adt-in/lab is stalled (escalated)"},
      {NotificationKind::Reminder, "[CRITICAL] adt-in/lab is still stalled"},
      {NotificationKind::Recovered, "[RECOVERED] adt-in/lab is ok again (was stalled)"},
  };
  for (const auto& r : rows)
    EXPECT_EQ(composed(r.kind, WebhookFormat::Json, "x").subject, r.subject);
  AlertState c;
  c.subject.certificate = "server";
  c.state = State::Expiring;
  c.severity = Severity::Warning;
  EXPECT_EQ(composed(NotificationKind::Fired, WebhookFormat::Json, "", c).subject,
            "[WARNING] certificate:server is expiring");
}

TEST(AlertText, TheEmailTextSaysWhatSinceWhenWhyAndWhatToDo) {
  Notification n = composed(NotificationKind::Fired, WebhookFormat::Json, "nothing sent for 5m");
  EXPECT_NE(n.text.find("adt-in/lab is stalled (critical) since 2026-06-01T11:55:00.000Z"),
            std::string::npos)
      << n.text;
  EXPECT_NE(n.text.find("Reason: nothing sent for 5m\n"), std::string::npos);
  EXPECT_NE(n.text.find("Engine: eng1.example.org\n"), std::string::npos);
  EXPECT_NE(n.text.find("ductusctl alerts ack 42"), std::string::npos);
  Notification r = composed(NotificationKind::Recovered, WebhookFormat::Json, "");
  EXPECT_EQ(r.text.find("alerts ack"), std::string::npos) << r.text;
}

TEST(AlertText, JsonCarriesTheAlertsFields) {
  Notification n = composed(NotificationKind::Fired, WebhookFormat::Json, "refused: 503");
  auto j = nlohmann::json::parse(n.webhookBody);
  EXPECT_EQ(j["alert"], 42);
  EXPECT_EQ(j["subject"], "[CRITICAL] adt-in/lab is stalled");
  EXPECT_EQ(j["interface"], "adt-in");
  EXPECT_EQ(j["destination"], "lab");
  EXPECT_EQ(j["state"], "stalled");
  EXPECT_EQ(j["severity"], "critical");
  EXPECT_EQ(j["kind"], "fired");
  EXPECT_EQ(j["reason"], "refused: 503");
  EXPECT_EQ(j["at"], "2026-06-01T12:00:00.000Z");
  EXPECT_EQ(j["since"], "2026-06-01T11:55:00.000Z");
  EXPECT_EQ(j["engine"], "eng1.example.org");
}

TEST(AlertText, SlackIsOneMrkdwnTextWithItsMarkupEscaped) {
  Notification n = composed(NotificationKind::Fired, WebhookFormat::Slack, "a < b & c > d");
  auto j = nlohmann::json::parse(n.webhookBody);
  ASSERT_EQ(j.size(), 1u);
  const std::string t = j["text"];
  EXPECT_EQ(t.rfind("*[CRITICAL] adt-in/lab is stalled*\n", 0), 0u) << t;
  EXPECT_NE(t.find("a &lt; b &amp; c &gt; d"), std::string::npos) << t;
  EXPECT_EQ(t.find('<'), std::string::npos);
}

TEST(AlertText, TeamsIsAMessageCard) {
  Notification n = composed(NotificationKind::Fired, WebhookFormat::Teams, "refused");
  auto j = nlohmann::json::parse(n.webhookBody);
  EXPECT_EQ(j["@type"], "MessageCard");
  EXPECT_EQ(j["@context"], "https://schema.org/extensions");
  EXPECT_EQ(j["summary"], "[CRITICAL] adt-in/lab is stalled");
  EXPECT_EQ(j["title"], "[CRITICAL] adt-in/lab is stalled");
  EXPECT_EQ(j["themeColor"], "C62828");
  EXPECT_NE(std::string(j["text"]).find("refused"), std::string::npos);
  Notification r = composed(NotificationKind::Recovered, WebhookFormat::Teams, "");
  EXPECT_EQ(nlohmann::json::parse(r.webhookBody)["themeColor"], "2E7D32");
}

TEST(AlertText, AHostileReasonCannotAddHeadersLinesOrMarkup) {
  const std::string evil =
      "boom\r\nBcc: all@example.org\r\n\r\n<script>alert(1)</script>\"}{\x01\xff";
  AlertState a = stalled();
  a.subject.destination = "lab\r\nX-Injected: 1";  // even a hostile name
  for (auto f : {WebhookFormat::Json, WebhookFormat::Slack, WebhookFormat::Teams}) {
    Notification n = composed(NotificationKind::Fired, f, evil, a);
    EXPECT_EQ(n.subject.find_first_of("\r\n"), std::string::npos) << n.subject;
    // The reason is one line in the body: no header-like line of its own.
    EXPECT_EQ(n.text.find("\nBcc:"), std::string::npos) << n.text;
    EXPECT_EQ(n.text.find("\nX-Injected"), std::string::npos) << n.text;
    EXPECT_NE(n.text.find("Reason: boom Bcc: all@example.org <script>"), std::string::npos)
        << n.text;
    // Valid JSON whatever the bytes (one not UTF-8 is read as ISO-8859-1).
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(n.webhookBody)) << n.webhookBody;
    if (f == WebhookFormat::Json) {
      EXPECT_EQ(std::string(j["reason"]).rfind("boom Bcc: all@example.org <script>", 0), 0u);
    }
    if (f == WebhookFormat::Slack) {
      EXPECT_EQ(std::string(j["text"]).find("<script>"), std::string::npos);
    }
  }
}

TEST(AlertText, ALongReasonIsBoundedAtACharacterBoundary) {
  std::string longReason;
  for (int i = 0; i < 2000; ++i) longReason += "\xC3\xA9";  // é, two bytes
  const std::string line = oneLine(longReason);
  EXPECT_LE(line.size(), kMaxReasonBytes + 3);
  EXPECT_EQ(line.substr(line.size() - 3), "\xE2\x80\xA6");
  EXPECT_EQ(line.size() % 2, 1u);  // whole é's, then the 3-byte ellipsis
  EXPECT_EQ(oneLine("a\r\n\tb\x7f c"), "a b c");
  EXPECT_EQ(oneLine("\r\nlead"), "lead");
  EXPECT_EQ(oneLine("short"), "short");
}

}  // namespace
}  // namespace ductus::monitor
