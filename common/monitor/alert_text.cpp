// Notification texts. One sentence of what and how bad, built once
// (headline) and put into each format, so an e-mail and a webhook never
// say different things.
#include "common/monitor/alert_text.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "common/time_text.h"

namespace ductus::monitor {

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

// "[CRITICAL] adt-in/lab is stalled" and its kin.
std::string headline(const Notification& n, const AlertState& a) {
  const std::string key = a.subject.key();
  const std::string state(stateName(a.state));
  switch (n.kind) {
    case NotificationKind::Fired:
      return "[" + upper(severityName(a.severity)) + "] " + key + " is " + state;
    case NotificationKind::Escalated:
      return "[" + upper(severityName(a.severity)) + "] " + key + " is " + state + " (escalated)";
    case NotificationKind::Reminder:
      return "[" + upper(severityName(a.severity)) + "] " + key + " is still " + state;
    case NotificationKind::Recovered:
      return "[RECOVERED] " + key + " is ok again (was " + state + ")";
  }
  return key;
}

// Slack's mrkdwn reads &, < and > as markup; everything else is text.
std::string slackEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

std::string teamsColor(const Notification& n, Severity s) {
  if (n.kind == NotificationKind::Recovered) return "2E7D32";
  return s == Severity::Critical ? "C62828" : s == Severity::Warning ? "F9A825" : "1565C0";
}

std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string oneLine(std::string_view bytes, size_t max) {
  const std::string text = asText(bytes);  // UTF-8 (else read as ISO-8859-1)
  std::string out;
  out.reserve(std::min(text.size(), max));
  bool space = false;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      space = true;
      continue;
    }
    if (space && !out.empty() && out.back() != ' ' && c != ' ') out += ' ';
    space = false;
    out += static_cast<char>(c);
  }
  if (out.size() > max) {
    size_t cut = max;
    // Back to the start of a UTF-8 character (never split one).
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
    out += "\xE2\x80\xA6";  // …
  }
  return out;
}

void compose(Notification& n, const AlertState& a, const std::string& reason, WebhookFormat format,
             std::string_view engineHost) {
  const std::string why = oneLine(reason);
  const std::string host = oneLine(engineHost, 255);
  // A header: nothing in it may end the line (oneLine strips CR/LF).
  n.subject = oneLine(headline(n, a), 998);
  const std::string at = a.changedAt ? rfc3339(*a.changedAt) : "";
  const std::string since = a.openedAt ? rfc3339(*a.openedAt) : "";
  const std::string key = oneLine(a.subject.key(), 300);

  std::string text = n.subject + "\n\n";
  if (n.kind == NotificationKind::Recovered) {
    text += key + " has been good since " + (a.goodSince ? rfc3339(*a.goodSince) : at) +
            " (it was " + std::string(stateName(a.state)) + " from " + since + ").\n";
  } else {
    text += key + " is " + std::string(stateName(a.state)) + " (" +
            std::string(severityName(a.severity)) + ") since " + since + ".\n";
  }
  if (!why.empty()) text += "Reason: " + why + "\n";
  if (!host.empty()) text += "Engine: " + host + "\n";
  if (n.kind != NotificationKind::Recovered) {
    text +=
        "\nWhat to do: look at it with ductusctl status; acknowledge with "
        "ductusctl alerts ack " +
        std::to_string(a.id) + " (no more reminders until it recovers).\n";
  }
  n.text = std::move(text);

  switch (format) {
    case WebhookFormat::Json: {
      nlohmann::json j = {
          {"alert", a.id},
          {"subject", n.subject},
          {"key", a.subject.key()},
          {"interface", a.subject.interface},
          {"destination", a.subject.destination},
          {"certificate", a.subject.certificate},
          {"state", std::string(stateName(a.state))},
          {"severity", std::string(severityName(a.severity))},
          {"phase", std::string(phaseName(a.phase))},
          {"kind", std::string(notificationKindName(n.kind))},
          {"reason", why},
          {"engine", host},
          {"since", since},
          {"at", at},
      };
      n.webhookBody = dump(j);
      break;
    }
    case WebhookFormat::Slack: {
      std::string t = "*" + slackEscape(n.subject) + "*";
      if (!why.empty()) t += "\n" + slackEscape(why);
      if (n.kind != NotificationKind::Recovered)
        t += "\nAcknowledge: `ductusctl alerts ack " + std::to_string(a.id) + "`";
      n.webhookBody = dump(nlohmann::json{{"text", t}});
      break;
    }
    case WebhookFormat::Teams: {
      // Teams renders a MessageCard's text as Markdown; the body is still
      // JSON-escaped by construction.
      std::string t = why.empty() ? key : why;
      if (n.kind != NotificationKind::Recovered)
        t += "\n\nAcknowledge: ductusctl alerts ack " + std::to_string(a.id);
      nlohmann::json j = {
          {"@type", "MessageCard"}, {"@context", "https://schema.org/extensions"},
          {"summary", n.subject},   {"themeColor", teamsColor(n, a.severity)},
          {"title", n.subject},     {"text", t},
      };
      n.webhookBody = dump(j);
      break;
    }
  }
}

}  // namespace ductus::monitor
