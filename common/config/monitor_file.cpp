// monitor: (interface.yaml and a destination's) and alerts: (ductus.yaml)
// into the shapes of common/monitor/settings.h, every mistake at its line.
#include <cctype>

#include "common/config/project_files.h"
#include "common/config/suggest.h"
#include "common/cron.h"

namespace ductus::config {

namespace {

using monitor::Seconds;

// A duration key of `sec`, within its bounds, in whole seconds.
std::optional<Seconds> seconds(YamlReader& r, const YAML::Node& n, const Section& sec,
                               std::string_view key, const std::string& path) {
  auto d = r.duration(n, sec, key, path);
  if (!d) return std::nullopt;
  return std::chrono::duration_cast<Seconds>(*d);
}

// "06:00": minutes after local midnight; strictly HH:MM, 00:00-23:59.
std::optional<int> clockMinute(std::string_view t) {
  if (t.size() != 5 || t[2] != ':') return std::nullopt;
  for (size_t i : {0u, 1u, 3u, 4u})
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return std::nullopt;
  int h = (t[0] - '0') * 10 + (t[1] - '0'), m = (t[3] - '0') * 10 + (t[4] - '0');
  if (h > 23 || m > 59) return std::nullopt;
  return h * 60 + m;
}

std::optional<int> clock(YamlReader& r, const YAML::Node& n, std::string_view key,
                         const std::string& path) {
  auto t = r.text(n, key, path);
  if (!t) return std::nullopt;
  if (auto m = clockMinute(*t)) return m;
  r.error(n[std::string(key)], joinPath(path, key),
          "expected a time of day as HH:MM (00:00-23:59), got `" + *t + "`");
  return std::nullopt;
}

// "07:00-19:00"
std::optional<monitor::DayWindow> window(YamlReader& r, const YAML::Node& n, std::string_view key,
                                         const std::string& path) {
  auto t = r.text(n, key, path);
  if (!t) return std::nullopt;
  auto dash = t->find('-');
  std::optional<int> a, b;
  if (dash != std::string::npos) {
    a = clockMinute(std::string_view(*t).substr(0, dash));
    b = clockMinute(std::string_view(*t).substr(dash + 1));
  }
  if (!a || !b) {
    r.error(n[std::string(key)], joinPath(path, key),
            "expected a part of the day as \"HH:MM-HH:MM\" (e.g. \"07:00-19:00\"; a window past "
            "midnight like \"22:00-06:00\" runs into the next day), got `" + *t + "`");
    return std::nullopt;
  }
  if (*a == *b) {
    r.error(n[std::string(key)], joinPath(path, key),
            "the window starts and ends at the same time: give two different times");
    return std::nullopt;
  }
  return monitor::DayWindow{*a, *b};
}

std::optional<int> weekday(std::string_view w) {
  static const char* const kNames[] = {"sunday", "monday", "tuesday", "wednesday",
                                       "thursday", "friday", "saturday"};
  std::string lower;
  for (char c : w) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int i = 0; i < 7; ++i) {
    std::string full = kNames[i];
    if (lower == full || lower == full.substr(0, 3)) return i;
  }
  return std::nullopt;
}

// An address as it will go into SMTP commands and headers: local@domain,
// nothing that could end a command or add a recipient.
bool plainAddress(std::string_view a) {
  auto at = a.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 >= a.size() || a.size() > 254) return false;
  if (a.find('@', at + 1) != std::string_view::npos) return false;
  for (char c : a)
    if (static_cast<unsigned char>(c) <= ' ' || c == ',' || c == '<' || c == '>' || c == ';' ||
        c == '"' || c == '\\' || c == 0x7f)
      return false;
  return true;
}

bool httpUrl(std::string_view u) {
  return u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0;
}

std::optional<monitor::Behind> parseBehind(YamlReader& r, const YAML::Node& n,
                                           const std::string& path) {
  const Section& sec = section(SectionId::Behind);
  if (!r.map(n, path, sec)) return std::nullopt;
  monitor::Behind b;
  if (auto v = r.whole(n, sec, "waiting", path)) b.waiting = static_cast<int64_t>(*v);
  if (auto v = seconds(r, n, sec, "oldest", path)) b.oldest = *v;
  if (!YamlReader::has(n, "waiting") && !YamlReader::has(n, "oldest")) {
    r.error(n, path, "give waiting: (more messages than this wait), oldest: (the oldest has "
                     "waited longer than this), or both");
    return std::nullopt;
  }
  if (!b.waiting && !b.oldest) return std::nullopt;
  return b;
}

}  // namespace

void parseMonitor(YamlReader& r, const YAML::Node& n, const std::string& path,
                  monitor::Expectations& out, bool destinationOnly) {
  const Section& sec =
      section(destinationOnly ? SectionId::DestinationMonitor : SectionId::Monitor);
  if (!r.map(n, path, sec)) return;
  if (YamlReader::has(n, "behind")) out.behind = parseBehind(r, n["behind"], path + ".behind");
  if (YamlReader::has(n, "active_within")) {
    YAML::Node a = n["active_within"];
    std::string ap = path + ".active_within";
    monitor::ActiveWithin w;
    if (a.IsMap()) {
      const Section& ws = section(SectionId::ActiveWithin);
      if (r.map(a, ap, ws)) {
        if (!YamlReader::has(a, "within")) r.error(a, ap + ".within", "`within` is required");
        // Both read, so a wrong window is reported even when within is too.
        auto v = seconds(r, a, ws, "within", ap);
        auto between = window(r, a, "between", ap);
        if (v && (between || !YamlReader::has(a, "between"))) {
          w.within = *v;
          w.between = between;
          out.activeWithin = w;
        }
      }
    } else if (auto v = seconds(r, n, section(SectionId::Monitor), "active_within", path)) {
      w.within = *v;
      out.activeWithin = w;
    }
  }
  if (YamlReader::has(n, "active_by")) {
    YAML::Node a = n["active_by"];
    std::string ap = path + ".active_by";
    if (r.map(a, ap, section(SectionId::ActiveBy))) {
      int kinds = YamlReader::has(a, "daily") + YamlReader::has(a, "weekly") +
                  YamlReader::has(a, "cron");
      monitor::ActiveBy by;
      bool ok = true;
      if (kinds != 1) {
        r.error(a, ap, "give exactly one of daily: \"06:00\", weekly: \"mon 06:00\" or cron: "
                       "\"0 6 * * 1-5\"");
        ok = false;
      } else if (YamlReader::has(a, "daily")) {
        by.kind = monitor::ActiveBy::Kind::Daily;
        auto m = clock(r, a, "daily", ap);
        ok = m.has_value();
        if (m) by.minuteOfDay = *m;
      } else if (YamlReader::has(a, "weekly")) {
        by.kind = monitor::ActiveBy::Kind::Weekly;
        auto t = r.text(a, "weekly", ap);
        ok = false;
        if (t) {
          auto space = t->find(' ');
          std::optional<int> wd, m;
          if (space != std::string::npos) {
            wd = weekday(t->substr(0, space));
            m = clockMinute(std::string_view(*t).substr(space + 1));
          }
          if (wd && m) {
            by.weekday = *wd;
            by.minuteOfDay = *m;
            ok = true;
          } else {
            r.error(a["weekly"], ap + ".weekly",
                    "expected a weekday and a time, e.g. \"mon 06:00\", got `" + *t + "`");
          }
        }
      } else {
        by.kind = monitor::ActiveBy::Kind::Cron;
        ok = false;
        if (auto t = r.text(a, "cron", ap)) {
          if (auto c = parseCron(*t)) {
            by.cron = *t;
            ok = true;
          } else {
            r.error(a["cron"], ap + ".cron", c.error().message);
          }
        }
      }
      if (YamlReader::has(a, "from")) {
        if (auto m = clock(r, a, "from", ap)) by.fromMinute = *m;
      }
      if (ok) out.activeBy = by;
    }
  }
}

void parseAlerts(YamlReader& r, const YAML::Node& n, EngineConfig& e) {
  monitor::AlertSettings& s = e.alerts;
  s = monitor::AlertSettings{};
  e.alertChannelsAt.clear();
  e.alertRulesAt.clear();
  const std::string path = "alerts";
  const Section& sec = section(SectionId::Alerts);
  if (!r.map(n, path, sec)) return;
  s.enabled = true;
  if (YamlReader::has(n, "smtp")) {
    YAML::Node m = n["smtp"];
    std::string mp = path + ".smtp";
    const Section& ms = section(SectionId::Smtp);
    if (r.map(m, mp, ms)) {
      monitor::SmtpServer smtp;
      if (auto v = r.required(m, "host", mp, Subst::Yes)) smtp.host = *v;
      if (auto v = r.choice<monitor::SmtpServer::Tls>(
              m, ms, "tls", mp,
              {monitor::SmtpServer::Tls::StartTlsIfOffered,
               monitor::SmtpServer::Tls::StartTlsRequired, monitor::SmtpServer::Tls::Implicit,
               monitor::SmtpServer::Tls::Off}))
        smtp.tls = *v;
      smtp.port = smtp.tls == monitor::SmtpServer::Tls::Implicit ? 465 : 587;
      if (auto v = r.whole(m, ms, "port", mp)) smtp.port = static_cast<uint16_t>(*v);
      if (auto v = r.required(m, "from", mp, Subst::Yes)) {
        smtp.from = *v;
        if (!plainAddress(*v))
          r.error(m["from"], mp + ".from", "`" + *v + "` is not an address like ductus@hospital.org");
      }
      if (auto v = r.text(m, "user", mp, Subst::Yes)) smtp.user = *v;
      if (auto v = r.text(m, "password", mp, Subst::Yes)) smtp.password = *v;
      if (auto v = r.text(m, "ca", mp)) {
        smtp.ca = *v;
        e.alertsSmtpCaAt = r.at(m["ca"]);
      }
      s.smtp = smtp;
    }
  }
  if (YamlReader::has(n, "channels")) {
    YAML::Node cs = n["channels"];
    if (!cs.IsMap()) {
      r.error(cs, path + ".channels", "expected a mapping of channel names to { email: [...] } or "
                                      "{ webhook: URL, format: json | slack | teams }");
    } else {
      for (auto it = cs.begin(); it != cs.end(); ++it) {
        std::string name = it->first.as<std::string>("");
        std::string cp = path + ".channels." + name;
        YAML::Node c = it->second;
        const Section& chs = section(SectionId::Channel);
        if (!r.map(c, cp, chs)) continue;
        monitor::Channel ch;
        ch.name = name;
        if (YamlReader::has(c, "email")) {
          YAML::Node e = c["email"];
          if (e.IsSequence()) {
            for (size_t i = 0; i < e.size(); ++i)
              if (e[i].IsScalar()) ch.email.push_back(e[i].as<std::string>());
              else r.error(e[i], cp + ".email", "expected an e-mail address");
          } else if (auto v = r.text(c, "email", cp)) {
            ch.email.push_back(*v);
          }
        }
        for (size_t i = 0; i < ch.email.size(); ++i)
          if (!plainAddress(ch.email[i]))
            r.error(c["email"], cp + ".email",
                    "`" + ch.email[i] + "` is not an address like oncall@hospital.org");
        if (auto v = r.text(c, "webhook", cp, Subst::Yes)) {
          ch.webhook = *v;
          if (!httpUrl(*v)) r.error(c["webhook"], cp + ".webhook", "expected an http:// or https:// URL");
        }
        if (auto v = r.choice<monitor::WebhookFormat>(
                c, chs, "format", cp,
                {monitor::WebhookFormat::Json, monitor::WebhookFormat::Slack,
                 monitor::WebhookFormat::Teams}))
          ch.format = *v;
        if (ch.email.empty() && ch.webhook.empty())
          r.error(c, cp, "a channel needs email: (addresses) or webhook: (a URL), or both");
        s.channels.push_back(std::move(ch));
        e.alertChannelsAt.push_back(r.at(it->first));
      }
    }
  }
  for (const auto& c : s.channels)
    if (!c.email.empty() && !s.smtp) {
      r.error(n["channels"], path + ".channels." + c.name,
              "the channel sends e-mail: alerts.smtp: { host, port, from } is needed");
      break;
    }
  if (YamlReader::has(n, "rules")) {
    YAML::Node rs = n["rules"];
    if (!rs.IsSequence()) {
      r.error(rs, path + ".rules", "expected a list of { when: [states], severity, notify: [channels] }");
    } else {
      for (size_t i = 0; i < rs.size(); ++i) {
        YAML::Node rule = rs[i];
        std::string rp = path + ".rules[" + std::to_string(i) + "]";
        const Section& rls = section(SectionId::Rule);
        if (!r.map(rule, rp, rls)) continue;
        monitor::Rule out;
        YAML::Node w = rule["when"];
        if (!YamlReader::has(rule, "when") || !w.IsSequence() || w.size() == 0) {
          r.error(YamlReader::has(rule, "when") ? w : rule, rp + ".when",
                  "expected a list of states: stopped, paused, stalled, error, behind, "
                  "intake_stopped, late, quiet, expiring");
        } else {
          for (size_t k = 0; k < w.size(); ++k) {
            std::string t = w[k].IsScalar() ? w[k].as<std::string>() : "";
            auto st = monitor::parseState(t);
            if (!st || *st == monitor::State::Ok) {
              std::string near = nearestKey(t, {"stopped", "paused", "stalled", "error", "behind",
                                                "intake_stopped", "late", "quiet", "expiring"});
              r.error(w[k], rp + ".when",
                      "unknown state `" + t +
                          "`: expected stopped, paused, stalled, error, behind, intake_stopped, "
                          "late, quiet or expiring" +
                          (near.empty() ? "" : " \u2014 did you mean `" + near + "`?"));
            } else {
              out.when.push_back(*st);
            }
          }
        }
        if (auto v = r.choice<monitor::Severity>(
                rule, rls, "severity", rp,
                {monitor::Severity::Info, monitor::Severity::Warning, monitor::Severity::Critical}))
          out.severity = *v;
        YAML::Node to = rule["notify"];
        if (YamlReader::has(rule, "notify")) {
          if (to.IsSequence()) {
            for (size_t k = 0; k < to.size(); ++k)
              if (to[k].IsScalar()) out.notify.push_back(to[k].as<std::string>());
          } else if (auto v = r.text(rule, "notify", rp)) {
            out.notify.push_back(*v);
          }
          for (size_t k = 0; k < out.notify.size(); ++k) {
            bool found = false;
            for (auto& c : s.channels) found = found || c.name == out.notify[k];
            if (!found)
              r.error(to.IsSequence() ? to[k] : to, rp + ".notify",
                      "no channel `" + out.notify[k] + "` under alerts.channels");
          }
        }
        s.rules.push_back(std::move(out));
        e.alertRulesAt.push_back(r.at(rule));
      }
    }
  }
  if (YamlReader::has(n, "heartbeat")) {
    YAML::Node h = n["heartbeat"];
    std::string hp = path + ".heartbeat";
    const Section& hs = section(SectionId::Heartbeat);
    if (r.map(h, hp, hs)) {
      monitor::Heartbeat hb;
      if (auto v = r.required(h, "url", hp, Subst::Yes)) {
        hb.url = *v;
        if (!httpUrl(*v)) r.error(h["url"], hp + ".url", "expected an http:// or https:// URL");
      }
      if (auto v = seconds(r, h, hs, "every", hp)) hb.every = *v;
      if (!hb.url.empty()) s.heartbeat = hb;
    }
  }
  if (YamlReader::has(n, "quiet_hours")) {
    YAML::Node q = n["quiet_hours"];
    std::string qp = path + ".quiet_hours";
    if (r.map(q, qp, section(SectionId::QuietHours))) {
      monitor::QuietHours qh;
      if (!YamlReader::has(q, "between")) r.error(q, qp + ".between", "`between` is required");
      auto w = window(r, q, "between", qp);
      if (YamlReader::has(q, "hold")) {
        qh.hold.clear();
        YAML::Node hold = q["hold"];
        if (!hold.IsSequence()) {
          r.error(hold, qp + ".hold", "expected a list of severities: info, warning, critical");
        } else {
          for (size_t k = 0; k < hold.size(); ++k) {
            std::string t = hold[k].IsScalar() ? hold[k].as<std::string>() : "";
            if (auto sv = monitor::parseSeverity(t)) qh.hold.push_back(*sv);
            else r.error(hold[k], qp + ".hold", "unknown severity `" + t + "`: expected info, warning or critical");
          }
        }
      }
      if (w) {
        qh.between = *w;
        s.quietHours = qh;
      }
    }
  }
  // Alerts are judged every 15 s: a reminder can't come sooner than a round.
  if (auto v = seconds(r, n, sec, "remind", path)) s.remind = *v;
  if (auto v = seconds(r, n, sec, "settle", path)) s.settle = *v;
  if (auto v = seconds(r, n, sec, "keep", path)) s.keep = *v;
  if (YamlReader::has(n, "certificates")) {
    YAML::Node c = n["certificates"];
    std::string cp = path + ".certificates";
    const Section& cs = section(SectionId::AlertCertificates);
    if (r.map(c, cp, cs)) {
      YAML::Node d = c["warn_days"];
      const Key& k = cs.key("warn_days");
      std::vector<int> days;
      bool ok = d.IsSequence() && d.size() > 0;
      for (size_t i = 0; ok && i < d.size(); ++i) {
        int v = d[i].IsScalar() ? d[i].as<int>(0) : 0;
        ok = v >= static_cast<int>(k.min) && v <= static_cast<int>(k.max) &&
             (days.empty() || v < days.back());
        days.push_back(v);
      }
      if (ok) s.certificateDays = days;
      else r.error(d, cp + ".warn_days", "expected whole days, descending, e.g. [30, 14, 7]");
    }
  }
}

}  // namespace ductus::config
