#include "supervisor/monitor/monitor.h"

#include <algorithm>

#include "common/config/model.h"
#include "common/countdown.h"
#include "common/log.h"
#include "common/monitor/hotspots.h"
#include "common/net/curl_easy.h"
#include "common/time_text.h"
#include "common/tls/certificates.h"
#include "schema/alert_store.h"
#include "schema/queue_probes.h"
#include "supervisor/alerts/heartbeat.h"
#include "supervisor/alerts/notifier.h"
#include "supervisor/delivery/activity.h"
#include "supervisor/monitor/activity_keeper.h"
#include "supervisor/monitor/alert_round.h"
#include "supervisor/monitor/outbox.h"
#include "supervisor/monitor/traffic_rollup.h"

namespace ductus::supervisor {

namespace {
// GET /hotspots judges as many lanes of a destination as the store probes
// (the most waiting first) and shows the first kLanesShown.
constexpr size_t kLanesShown = 10;
}  // namespace

Monitor::Monitor(Deps deps, std::vector<HealthJudge::Interface> watched)
    : deps_(std::move(deps)), watched_(std::move(watched)) {
  std::vector<ActivityKeeper::Watched> kept;
  for (const auto& w : watched_)
    kept.push_back({w.interfaceId, w.activity, w.destinationIds});
  std::vector<TrafficRollup::Watched> counted;
  for (const auto& w : watched_) counted.push_back({w.interfaceId, w.activity, w.destinationIds});
  keeper_ = std::make_unique<ActivityKeeper>(deps_.loop, *deps_.pool, std::move(kept));
  traffic_ = std::make_unique<TrafficRollup>(deps_.loop, *deps_.pool, std::move(counted));
  judge_ = std::make_unique<HealthJudge>(*deps_.pool, *keeper_, watched_, deps_.startedAt);
}

Monitor::~Monitor() { *alive_ = false; }

void Monitor::start(std::function<void(Status)> done) {
  auto alive = alive_;
  keeper_->start([this, alive, done = std::move(done)](Status s) {
    if (!*alive) return;
    // Without its history the monitor still judges, from now on.
    if (!s) spdlog::warn("monitor: loading last activity failed: {}", s.error().message);
    started_ = true;
    traffic_->start();
    const auto& settings = deps_.project->engine.alerts;
    if (!settings.enabled) return done({});
    std::shared_ptr<const net::CurlTls> smtpTls;
    if (settings.smtp && !settings.smtp->ca.empty() && deps_.tls) {
      tls::ConnectTls ca;
      ca.enabled = true;
      ca.ca = settings.smtp->ca;
      if (auto client = deps_.tls->client(ca))
        smtpTls = std::make_shared<net::CurlTls>(*client);
      else
        spdlog::error("alerts: alerts.smtp.ca {}: {}; the mail server is verified with the "
                      "system's roots",
                      settings.smtp->ca, client.error().message);
    }
    notifier_ = std::make_unique<alerts::Notifier>(*deps_.curl, settings, smtpTls);
    outbox_ = std::make_unique<Outbox>(deps_.loop, *deps_.pool, *notifier_, Outbox::Options{});
    AlertRound::Deps r;
    r.loop = deps_.loop;
    r.pool = deps_.pool;
    r.settings = &settings;
    r.snapshot = [this, alive](auto answer) {
      deps_.counts([this, alive, answer = std::move(answer)](
                       Result<std::vector<api::InterfaceInfo>> list) mutable {
        if (!*alive) return;
        if (!list) return answer(list.error());
        judge_->annotate(std::move(*list), [answer = std::move(answer)](
                                               HealthJudge::Judged j) mutable {
          answer(std::move(j));
        });
      });
    };
    r.certificates = deps_.certificates;
    r.startedAt = deps_.startedAt;
    r.host = deps_.host;
    r.events = deps_.events;
    r.notified = [this] {
      if (outbox_) outbox_->wake();
    };
    round_ = std::make_unique<AlertRound>(std::move(r));
    outbox_->start();
    round_->start();
    purgeTimer_ = makeTimer(deps_.loop, this);
    uv_timer_start(
        purgeTimer_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<Monitor*>(t->data);
          if (!self) return;
          store::purgeAlerts(
              *self->deps_.pool, self->deps_.project->engine.alerts.keep,
              [alive = self->alive_](Result<int64_t> n) {
                if (!*alive) return;
                if (!n)
                  spdlog::warn("alerts: deleting history past alerts.keep failed: {}",
                               n.error().message);
                else if (*n > 0)
                  spdlog::info("alerts: {} rows of history past alerts.keep deleted", *n);
              });
        },
        90 * 1000, 3600 * 1000);
    if (settings.heartbeat) {
      heartbeat_ = std::make_unique<alerts::Heartbeat>(*deps_.curl, *settings.heartbeat);
      heartbeat_->start();
    }
    done({});
  });
}

void Monitor::stop(std::function<void()> done) {
  // No new rounds, sends or beats; a claimed notification not sent is
  // claimable again when its lease ends.
  round_.reset();
  purgeTimer_.reset();
  outbox_.reset();
  heartbeat_.reset();
  notifier_.reset();
  if (!started_) return done();
  started_ = false;
  auto alive = alive_;
  keeper_->saveNow([this, alive, done = std::move(done)](Status s) {
    if (!*alive) return done();
    if (!s) spdlog::warn("monitor: saving last activity at the stop failed: {}", s.error().message);
    // The minute in progress, for the charts.
    traffic_->flushNow(std::move(done));
  });
}

void Monitor::annotate(std::vector<api::InterfaceInfo> list,
                       std::function<void(std::vector<api::InterfaceInfo>)> done) {
  if (!started_) return done(std::move(list));
  judge_->annotate(std::move(list), [done = std::move(done)](HealthJudge::Judged j) {
    done(std::move(j.interfaces));
  });
}

std::vector<store::TrafficRow> Monitor::unsavedTraffic(int64_t interfaceId) const {
  if (!started_) return {};
  return traffic_->unsaved(interfaceId);
}

void Monitor::hotspots(std::vector<api::InterfaceInfo> list,
                       std::function<void(Result<std::vector<api::HotspotInfo>>)> done) {
  struct Asked {
    api::HotspotInfo info;
    const HealthJudge::Interface* in = nullptr;
    int64_t destinationId = 0;
    std::optional<std::chrono::system_clock::time_point> lastFinished;
    std::vector<delivery::RetryWait> retries;  // its loops waiting to try again
  };
  auto asked = std::make_shared<std::vector<Asked>>();
  for (const auto& i : list)
    for (const auto& w : watched_) {
      if (w.config->name != i.name) continue;
      for (size_t j = 0; j < i.destinations.size() && j < w.destinationIds.size(); ++j) {
        const auto& d = i.destinations[j];
        if (d.pending.value_or(0) <= 0 || !w.destinationIds[j]) continue;
        Asked a;
        a.info.interface = i.name;
        a.info.destination = d.name;
        a.info.waiting = *d.pending;
        a.in = &w;
        a.destinationId = w.destinationIds[j];
        if (w.activity && j < w.activity->destinations.size())
          if (int64_t ms = w.activity->destinations[j].lastFinished.ms(); ms > 0)
            a.lastFinished = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
        if (w.activity && j < w.activity->destinations.size())
          a.retries = w.activity->destinations[j].retryWaits();
        asked->push_back(std::move(a));
      }
    }
  auto alive = alive_;
  auto failed = std::make_shared<std::optional<Error>>();
  auto all = Countdown::make([alive, asked, failed, done = std::move(done)] {
    if (!*alive) return;
    if (*failed) return done(**failed);
    std::vector<api::HotspotInfo> out;
    for (auto& a : *asked) out.push_back(std::move(a.info));
    done(std::move(out));
  });
  for (size_t k = 0; k < asked->size(); ++k) {
    store::lanes(*deps_.pool, (*asked)[k].destinationId, store::kMaxLanesProbed,
                 [alive, asked, failed, k, step = all->add()](
                     Result<std::vector<store::LaneRow>> rows) {
                   if (!*alive) return;
                   if (!rows) {
                     *failed = rows.error();
                     return step();
                   }
                   Asked& a = (*asked)[k];
                   monitor::LaneFacts facts;
                   facts.waiting = a.info.waiting;
                   facts.loops = a.in->slots;
                   facts.partitions = a.in->partitions;
                   facts.lastFinished = a.lastFinished;
                   for (const auto& r : *rows) {
                     monitor::LaneFact l;
                     l.lane = r.lane;
                     l.waiting = r.waiting;
                     l.firstMessageId = r.firstMessageId;
                     l.firstKey = r.key;
                     l.firstAttempts = r.attempts;
                     l.firstLastError = r.lastError;
                     l.firstReceivedAt = r.receivedAt;
                     facts.lanes.push_back(l);
                     // Every lane is judged; the busiest are shown (most
                     // waiting first, as the store returns them).
                     if (a.info.lanes.size() >= kLanesShown) continue;
                     api::LaneInfo li;
                     li.lane = r.lane;
                     li.waiting = r.waiting;
                     li.firstMessageId = r.firstMessageId;
                     li.firstKey = r.key;
                     li.firstAttempts = r.attempts;
                     li.firstLastError = r.lastError;
                     li.firstReceivedAt = rfc3339(r.receivedAt);
                     for (const auto& wait : a.retries)
                       if (wait.lanes.empty() ||  // the destination's only loop
                           std::find(wait.lanes.begin(), wait.lanes.end(), r.lane) !=
                               wait.lanes.end())
                         li.nextRetryAt = rfc3339(std::chrono::system_clock::time_point(
                             std::chrono::milliseconds(wait.atMs)));
                     a.info.lanes.push_back(std::move(li));
                   }
                   for (auto& f : monitor::findHotspots(facts))
                     a.info.findings.push_back({f.kind, f.text});
                   step();
                 });
  }
  all->start();
}

}  // namespace ductus::supervisor
