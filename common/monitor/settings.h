// Monitoring as a project writes it: an interface's monitor: expectations
// (interface.yaml) and the engine's alerts: (ductus.yaml). Plain data, read
// by common/config (which checks it, with file and line) and used by
// common/monitor (the pure judgement) and the engine (which gathers the
// facts and sends). Written once here so the loader and the judge cannot
// disagree on a field. Never logged whole: an SMTP password is a secret.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ductus::monitor {

using Clock = std::chrono::system_clock;
using TimePoint = Clock::time_point;
using Seconds = std::chrono::seconds;

// ---- states, worst first -------------------------------------------------

// What a destination or an interface is judged to be. Worst first: where
// two apply, the smaller value wins (worst()). A destination is one of
// paused, stalled, error, behind, ok; an interface is the worst of its
// destinations, or stopped (its code was stopped as a runaway),
// intake_stopped (an operator stopped its intake, POST .../stop: neither
// late nor quiet while so, and ranked below its destinations' troubles,
// which go on: delivery doesn't stop with intake), late (active_by's
// deadline passed with nothing received) or quiet (active_within passed
// with nothing received). Expiring is a certificate's alone (alerts at
// certificateDays before its end). Stored and written by name, never by
// value, so a state may be added anywhere in the order.
enum class State : uint8_t {
  Stopped,
  Paused,
  Stalled,
  Error,
  Behind,
  IntakeStopped,
  Late,
  Quiet,
  Expiring,
  Ok
};

constexpr std::string_view stateName(State s) {
  switch (s) {
    case State::Stopped: return "stopped";
    case State::Paused: return "paused";
    case State::Stalled: return "stalled";
    case State::Error: return "error";
    case State::Behind: return "behind";
    case State::IntakeStopped:
      return "intake_stopped";
    case State::Late: return "late";
    case State::Quiet: return "quiet";
    case State::Expiring: return "expiring";
    case State::Ok: return "ok";
  }
  return "ok";
}
std::optional<State> parseState(std::string_view text);  // state.cpp
constexpr State worst(State a, State b) { return a < b ? a : b; }

enum class Severity : uint8_t { Info, Warning, Critical };
constexpr std::string_view severityName(Severity s) {
  return s == Severity::Critical ? "critical" : s == Severity::Warning ? "warning" : "info";
}
std::optional<Severity> parseSeverity(std::string_view text);  // state.cpp

// ---- monitor: in interface.yaml ------------------------------------------

// A part of each local day, "07:00-19:00" (minutes after local midnight).
// end <= start wraps midnight: "22:00-06:00".
struct DayWindow {
  int startMinute = 0;
  int endMinute = 0;
};

// behind: { waiting: 5, oldest: 10m }: either or both. Behind when more
// than `waiting` messages wait, or the oldest has waited longer than
// `oldest`.
struct Behind {
  std::optional<int64_t> waiting;
  std::optional<Seconds> oldest;
};

// active_within: 30m (between: "07:00-19:00"): something must be received
// within every 30 minutes, counted only inside the window when one is set.
struct ActiveWithin {
  Seconds within{0};
  std::optional<DayWindow> between;
};

// active_by: { daily: "06:00" } | { weekly: "mon 06:00" } |
// { cron: "0 6 * * 1-5" }, optional from: "04:00": by each deadline
// something must have been received since the window's start (local
// midnight of the deadline's day, or `from` on that day).
struct ActiveBy {
  enum class Kind : uint8_t { Daily, Weekly, Cron };
  Kind kind = Kind::Daily;
  int minuteOfDay = 0;  // daily and weekly
  int weekday = 1;      // weekly: 0 = Sunday ... 6 = Saturday
  std::string cron;     // cron: 5 fields, local time (common/cron.h)
  std::optional<int> fromMinute;
};

struct Expectations {
  std::optional<Behind> behind;  // each destination's unless it sets its own
  std::optional<ActiveWithin> activeWithin;
  std::optional<ActiveBy> activeBy;
  bool any() const { return behind || activeWithin || activeBy; }
};

// ---- alerts: in ductus.yaml ----------------------------------------------

struct SmtpServer {
  std::string host;
  uint16_t port = 587;
  std::string from;
  std::string user;      // optional; with password: AUTH
  std::string password;  // substitution allowed (${secret:...})
  // starttls (default): STARTTLS when the server offers it (with a user,
  // required: a password never goes in the clear); required:
  // refuse a server that doesn't; tls: implicit TLS (smtps, usually 465);
  // off: plain (loopback test servers only).
  enum class Tls : uint8_t { StartTlsIfOffered, StartTlsRequired, Implicit, Off };
  Tls tls = Tls::StartTlsIfOffered;
  std::string ca;  // a certificates: entry to verify the server with; empty: the system's roots
};

enum class WebhookFormat : uint8_t { Json, Slack, Teams };
constexpr std::string_view webhookFormatName(WebhookFormat f) {
  return f == WebhookFormat::Slack ? "slack" : f == WebhookFormat::Teams ? "teams" : "json";
}

// A channel is e-mail addresses, a webhook, or both.
struct Channel {
  std::string name;
  std::vector<std::string> email;
  std::string webhook;  // http(s) URL; substitution allowed
  WebhookFormat format = WebhookFormat::Json;
};

// - { when: [stalled, behind], severity: critical, notify: [oncall] }
// The first rule naming a state gives its severity and channels; a state
// no rule names raises no alert.
struct Rule {
  std::vector<State> when;
  Severity severity = Severity::Warning;
  std::vector<std::string> notify;  // channel names
};

// heartbeat: { url: ..., every: 1m }: a GET every `every` while the engine
// serves, so an outside monitor notices an engine that is gone.
struct Heartbeat {
  std::string url;
  Seconds every{60};
};

// quiet_hours: { between: "22:00-07:00", hold: [info, warning] }: a
// notification of a held severity made inside the window is sent when the
// window ends (a recovery in the meantime cancels it).
struct QuietHours {
  DayWindow between;
  std::vector<Severity> hold{Severity::Info, Severity::Warning};
};

struct AlertSettings {
  bool enabled = false;  // alerts: present
  std::optional<SmtpServer> smtp;
  std::vector<Channel> channels;
  std::vector<Rule> rules;
  std::optional<Heartbeat> heartbeat;
  std::optional<QuietHours> quietHours;
  Seconds remind{3600};   // remind: until acknowledged
  Seconds settle{120};    // recover after good this long; bad again sooner reopens
  Seconds keep{Seconds(365L * 24 * 3600)};  // history kept
  std::vector<int> certificateDays{30, 14, 7};  // certificates: { warn_days: }

  const Channel* channel(std::string_view name) const {
    for (const auto& c : channels)
      if (c.name == name) return &c;
    return nullptr;
  }
};

}  // namespace ductus::monitor
