#include "supervisor/monitor/alert_round.h"

#include <map>
#include <optional>

#include "common/countdown.h"
#include "common/log.h"
#include "common/monitor/alerts.h"
#include "common/time_text.h"
#include "schema/alert_store.h"

namespace ductus::supervisor {

namespace {

// A notification as the outbox keeps it: one row per channel and kind of
// recipient (the e-mail addresses together, the webhook alone).
std::vector<store::OutboxRow> outboxRows(const monitor::Notification& n,
                                         const monitor::AlertSettings& settings) {
  std::vector<store::OutboxRow> rows;
  const monitor::Channel* c = settings.channel(n.channel);
  if (!c) return rows;  // validate refuses a rule naming no channel
  if (!c->email.empty()) {
    store::OutboxRow r;
    r.channel = c->name;
    r.kind = "email";
    for (const auto& a : c->email) r.target += (r.target.empty() ? "" : ",") + a;
    r.subject = n.subject;
    r.body = n.text;
    r.contentType = "text/plain; charset=utf-8";
    r.due = n.due;
    rows.push_back(std::move(r));
  }
  if (!c->webhook.empty()) {
    store::OutboxRow r;
    r.channel = c->name;
    r.kind = "webhook";
    r.target = c->webhook;
    r.subject = n.subject;
    r.body = n.webhookBody;
    r.contentType = "application/json";
    r.due = n.due;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

AlertRound::AlertRound(Deps deps) : deps_(std::move(deps)) {}

AlertRound::~AlertRound() { *alive_ = false; }

void AlertRound::start() {
  timer_ = makeTimer(deps_.loop, this);
  auto ms = static_cast<uint64_t>(deps_.every.count());
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<AlertRound*>(t->data)) self->runOnce([](bool) {});
      },
      ms, ms);
}

void AlertRound::runOnce(std::function<void(bool)> done) {
  if (running_) return done(false);
  running_ = true;
  auto alive = alive_;
  began_ = std::chrono::steady_clock::now();
  deps_.snapshot([this, alive, done = std::move(done)](
                     Result<HealthJudge::Judged> j) mutable {
    if (!*alive) return;
    if (!j) {
      running_ = false;
      spdlog::warn("alerts: this round could not read the engine's state: {}",
                   j.error().message);
      return done(false);
    }
    judged(std::move(*j), std::move(done));
  });
}

void AlertRound::judged(HealthJudge::Judged j, std::function<void(bool)> done) {
  std::vector<Observed> observed;
  for (const auto& i : j.interfaces) {
    Observed o;
    o.subject.interface = i.name;
    if (auto own = j.own.find(i.name); own != j.own.end()) {
      o.state = own->second.state;
      o.reason = own->second.reason;
    }
    observed.push_back(std::move(o));
    for (const auto& d : i.destinations) {
      if (!d.health) continue;
      Observed od;
      od.subject.interface = i.name;
      od.subject.destination = d.name;
      od.state = monitor::parseState(d.health->state).value_or(monitor::State::Ok);
      od.reason = d.health->reason;
      observed.push_back(std::move(od));
    }
  }
  if (deps_.certificates)
    for (const auto& c : deps_.certificates()) {
      Observed o;
      o.subject.certificate = c.name;
      o.notAfter = c.notAfter;
      o.reason = "the certificate " + c.name + " (" + c.subject + ") ends " + rfc3339(c.notAfter);
      observed.push_back(std::move(o));
    }
  auto alive = alive_;
  store::loadAlerts(*deps_.pool, [this, alive, observed = std::move(observed),
                                  done = std::move(done)](
                                     Result<std::vector<monitor::AlertState>> stored) mutable {
    if (!*alive) return;
    if (!stored) {
      running_ = false;
      spdlog::warn("alerts: reading the alerts failed: {}", stored.error().message);
      return done(false);
    }
    stepAll(std::move(observed), std::move(*stored), std::move(done));
  });
}

void AlertRound::stepAll(std::vector<Observed> observed, std::vector<monitor::AlertState> stored,
                         std::function<void(bool)> done) {
  std::map<std::string, monitor::AlertState> byKey;
  for (auto& a : stored) byKey.emplace(a.subject.key(), std::move(a));
  const auto now = std::chrono::system_clock::now();
  const auto& settings = *deps_.settings;

  std::vector<store::AlertWrite> writes;
  for (auto& o : observed) {
    monitor::AlertState current;
    if (auto it = byKey.find(o.subject.key()); it != byKey.end())
      current = it->second;
    else
      current.subject = o.subject;
    monitor::Step s =
        o.notAfter ? monitor::certificateStep(current, *o.notAfter, now, settings, deps_.host)
                   : monitor::step(current, o.state, now, deps_.startedAt, settings, o.reason,
                                   deps_.host);
    if (s.change == monitor::Change::None || s.change == monitor::Change::Hold) continue;
    store::AlertWrite w;
    w.before = current;
    w.after = s.next;
    w.change = std::string(monitor::changeName(s.change));
    w.reason = o.reason;
    w.cancelPending = s.change == monitor::Change::Recover;
    for (auto& n : s.notify)
      for (auto& r : outboxRows(n, settings)) w.notifications.push_back(std::move(r));
    writes.push_back(std::move(w));
  }
  cost_.judged = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - began_);
  cost_.subjects = observed.size();
  cost_.changes = writes.size();
  ++rounds_;
  spdlog::debug("alerts: round {} judged {} subjects in {:.1f} ms, {} to write", rounds_,
                cost_.subjects, static_cast<double>(cost_.judged.count()) / 1000.0,
                cost_.changes);
  if (writes.empty()) {
    running_ = false;
    return done(true);
  }

  auto alive = alive_;
  auto notified = std::make_shared<bool>(false);
  auto all = Countdown::make([this, alive, notified, done = std::move(done)] {
    if (!*alive) return;
    running_ = false;
    if (*notified && deps_.notified) deps_.notified();
    done(true);
  });
  for (auto& w : writes) {
    bool notifies = !w.notifications.empty();
    std::string key = w.after.subject.key(), change = w.change;
    auto state = std::string(monitor::stateName(w.after.state));
    // What the Events page keeps of it: a fire (or a reopen) and a recovery.
    std::optional<events::Event> event;
    if (deps_.events && (change == "fire" || change == "reopen" || change == "recover")) {
      const auto& subject = w.after.subject;
      event = events::Event{
          change == "recover" ? events::Kind::AlertResolved : events::Kind::AlertFired,
          subject.interface, subject.destination, 0,
          change == "recover" ? key + " recovered"
                              : key + " " + state + (change == "reopen" ? " again" : "") +
                                    (w.reason.empty() ? "" : ": " + w.reason)};
    }
    store::applyStep(*deps_.pool, std::move(w),
                     [this, alive, notified, notifies, key, change, state, event,
                      step = all->add()](Result<bool> applied) {
                       if (*alive && applied && *applied) {
                         spdlog::info("alert {}: {} ({})", key, change, state);
                         if (notifies) *notified = true;
                         if (event) deps_.events->record(*event);
                       } else if (*alive && !applied) {
                         spdlog::warn("alert {}: writing its {} failed: {}", key, change,
                                      applied.error().message);
                       }
                       step();
                     });
  }
  all->start();
}

}  // namespace ductus::supervisor
