// What a notification says: an e-mail's subject and plain-text body, and a
// webhook's body in the channel's format (json, slack, teams). The reason
// is hostile text (a receiver's error quoted by the diagnosis): it is made
// one line of printable text and bounded; the subject, an e-mail header,
// never carries CR or LF; the JSON is built by nlohmann::json, so escaping
// is by construction.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/monitor/alert_state.h"

namespace ductus::monitor {

// The most of a reason a notification carries, in bytes (cut at a
// character boundary, "…" appended).
inline constexpr size_t kMaxReasonBytes = 1000;

// One line of printable UTF-8 text: bytes that aren't UTF-8 read as
// ISO-8859-1 (common/text.h), control characters (CR, LF, tab, NUL, ...)
// become a space, runs of them one; bounded to `max` bytes.
std::string oneLine(std::string_view text, size_t max = kMaxReasonBytes);

// Fills n.subject, n.text and n.webhookBody from the alert after the step
// (next) and the notification's kind. "at" is next.changedAt.
void compose(Notification& n, const AlertState& next, const std::string& reason,
             WebhookFormat format, std::string_view engineHost);

}  // namespace ductus::monitor
