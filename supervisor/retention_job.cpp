#include "supervisor/retention_job.h"

#include "common/log.h"
#include "common/time_text.h"

namespace ductus::supervisor {
namespace {

// Dedupe keys of interfaces no longer in the project: kept as long as the
// longest tier keeps messages.
constexpr int64_t kOthersSeconds = 49ll * 24 * 3600;

std::string period(const store::PeriodInfo& p) {
  return std::string("the ") + store::tierName(p.tier) + " period " + p.from + " to " + p.to;
}

}  // namespace

std::vector<RetentionLine> describeRun(const RetentionRun& run) {
  std::vector<RetentionLine> out;
  if (run.drops.busy)
    out.push_back({false, "retention: another retention run is under way on this database; "
                          "nothing dropped by this one"});
  for (auto& p : run.drops.dropped)
    out.push_back({false, "retention: dropped " + period(p) + ": " + std::to_string(p.messages) +
                              " messages, " + std::to_string(p.deliveries) + " deliveries, " +
                              store::describeBytes(p.bytes) + " freed" +
                              (p.moved > 0 ? "; " + std::to_string(p.moved) +
                                                 " unfinished messages moved to the held area first"
                                           : "")});
  for (auto& p : run.drops.held)
    out.push_back({true, "retention: keeping " + period(p) + " past its drop date " + p.dropsOn +
                             ": " + std::to_string(p.unfinished) +
                             " unfinished messages or deliveries could not move to the held "
                             "area yet (in use while the run went by; tried again next run)"});
  for (auto& f : run.drops.failed)
    out.push_back({true, "retention: could not drop " + f + "; tried again at the next run"});
  if (run.held && (run.drops.moved > 0 || run.held->pending + run.held->quarantined > 0))
    out.push_back({false, "retention: the held area has " + std::to_string(run.held->pending) +
                              " pending and " + std::to_string(run.held->quarantined) +
                              " quarantined messages (" + store::describeBytes(run.held->bytes) +
                              "); they go once delivered, dismissed or resent and their month "
                              "is over"});
  const auto& tm = run.drops.tierMoves;
  if (tm.moved + tm.deleted > 0)
    out.push_back({false, "retention: " + std::to_string(tm.moved) +
                              " stored messages moved to their interface's new tier, " +
                              std::to_string(tm.deleted) +
                              " deleted that the new, shorter tier no longer keeps"});
  if (tm.deferred > 0)
    out.push_back({false, "retention: " + std::to_string(tm.deferred) +
                              " interfaces' stored messages wait for the next run to follow "
                              "their tier (a lock not had in time)"});
  if (run.dedupeKeysPurged > 0)
    out.push_back({false, "retention: purged " + std::to_string(run.dedupeKeysPurged) +
                              " dedupe keys past their window"});
  return out;
}

namespace {

store::RetentionOptions withInterfaces(store::RetentionOptions options, std::string conninfo,
                                       const std::vector<RetentionInterface>& interfaces) {
  options.conninfo = std::move(conninfo);
  for (auto& i : interfaces)
    if (i.purgeQuarantined) options.quarantinePurged.push_back(i.id);
  return options;
}

const char* changeName(store::TierState::Change c) {
  using Change = store::TierState::Change;
  switch (c) {
    case Change::None:
      return "none";
    case Change::New:
      return "new";
    case Change::Lengthened:
      return "lengthened";
    case Change::Waiting:
      return "waiting";
  }
  return "none";
}

api::RetentionRunInfo runInfo(const RetentionRun& run) {
  api::RetentionRunInfo i;
  i.at = rfc3339(std::chrono::system_clock::now());
  i.busy = run.drops.busy;
  i.dropped = static_cast<int64_t>(run.drops.dropped.size());
  i.moved = run.drops.moved;
  i.tierMoved = run.drops.tierMoves.moved;
  i.tierDeleted = run.drops.tierMoves.deleted;
  i.dedupeKeysPurged = run.dedupeKeysPurged;
  for (auto& p : run.drops.held)
    i.kept.push_back(std::string(store::tierName(p.tier)) + " " + p.from);
  i.failed = run.drops.failed;
  return i;
}

}  // namespace

RetentionJob::RetentionJob(uv_loop_t* loop, std::string conninfo,
                           std::vector<RetentionInterface> interfaces,
                           store::RetentionOptions options)
    : loop_(loop),
      interfaces_(std::move(interfaces)),
      retention_(loop, withInterfaces(options, conninfo, interfaces_)),
      reader_(loop, withInterfaces(options, conninfo, interfaces_)) {}

RetentionJob::~RetentionJob() { *alive_ = false; }

void RetentionJob::applyTiers(std::function<void(Result<std::map<int64_t, store::Tier>>)> cb) {
  std::vector<store::InterfaceTier> list;
  for (auto& i : interfaces_) list.push_back({i.id, i.name, i.configured});
  auto alive = alive_;
  retention_.applyTiers(std::move(list), [this, alive, cb](Result<std::vector<store::TierState>> r) {
    if (!*alive) return;
    if (!r) return cb(r.error());
    using Change = store::TierState::Change;
    for (auto& t : *r) {
      applied_[t.interfaceId] = t.applied;
      if (t.change == Change::Lengthened)
        spdlog::info(
            "retention of {} is now {}: its new messages are kept {} days, and "
            "those stored before move to it at retention's runs",
            t.name, store::tierName(t.applied), static_cast<int>(t.applied));
      else if (t.change == Change::Waiting)
        spdlog::warn("retention of {} is {} in the project but {} applies until someone runs "
                     "`ductus retention confirm {}` (shortening it deletes messages sooner); "
                     "its messages keep going to the {} tier{}",
                     t.name, store::tierName(t.configured), store::tierName(t.applied), t.name,
                     store::tierName(t.applied),
                     t.requestedAt ? " (asked since " + *t.requestedAt + ")" : "");
    }
    cb(applied_);
  });
}

void RetentionJob::start(std::chrono::milliseconds first, std::chrono::milliseconds every) {
  if (stopped_) return;
  timer_ = makeTimer(loop_, this);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<RetentionJob*>(t->data)) self->scheduled();
      },
      static_cast<uint64_t>(first.count()), static_cast<uint64_t>(every.count()));
}

void RetentionJob::stop() {
  stopped_ = true;
  timer_.reset();
}

void RetentionJob::scheduled() {
  if (running_ || stopped_) return;
  runOnce([](Result<RetentionRun> r) {
    if (!r) spdlog::warn("retention run failed: {}; tried again in an hour", r.error().message);
  });
}

void RetentionJob::runOnce(std::function<void(Result<RetentionRun>)> cb, bool log) {
  running_ = true;
  auto alive = alive_;
  auto done = [this, alive, cb, log](Result<RetentionRun> r) {
    if (!*alive) return;
    running_ = false;
    if (r) lastRun_ = runInfo(*r);
    if (r && log)
      for (auto& l : describeRun(*r)) {
        if (l.warning) spdlog::warn("{}", l.text);
        else spdlog::info("{}", l.text);
      }
    cb(std::move(r));
  };
  // The applied tiers as the database has them now: a confirmation from
  // the command line, or on the engine that owned these interfaces before,
  // applies here too (onApplied switches the intake), and the stored
  // messages follow the tier the database says.
  std::vector<store::InterfaceTier> list;
  for (auto& i : interfaces_) list.push_back({i.id, i.name, i.configured});
  retention_.readTiers(std::move(list),
                       [this, alive, done](Result<std::vector<store::TierState>> t) {
                         if (!*alive) return;
                         if (!t) return done(t.error());
                         std::vector<store::StoredTier> stored;
                         for (auto& s : *t) {
                           auto it = applied_.find(s.interfaceId);
                           bool changed = it != applied_.end() && it->second != s.applied;
                           applied_[s.interfaceId] = s.applied;
                           if (changed && onApplied_) onApplied_(s.interfaceId, s.applied);
                           for (auto& i : interfaces_)
                             if (i.id == s.interfaceId)
                               stored.push_back({i.id, s.applied, i.purgeQuarantined});
                         }
                         retention_.setStoredTiers(std::move(stored));
                         retention_.dropExpired([this, alive, done](Result<store::DropReport> r) {
                           if (!*alive) return;
                           if (!r) return done(r.error());
                           auto run = std::make_shared<RetentionRun>();
                           run->drops = std::move(*r);
                           movedTotal_ += run->drops.moved;
                           dedupe(run, done);
                         });
                       });
}

void RetentionJob::dedupe(std::shared_ptr<RetentionRun> run,
                          std::function<void(Result<RetentionRun>)> cb) {
  std::vector<store::DedupeWindow> windows;
  for (auto& i : interfaces_) {
    auto it = applied_.find(i.id);
    store::Tier tier = it == applied_.end() ? i.configured : it->second;
    int64_t seconds = i.dedupeWindow
                          ? std::chrono::duration_cast<std::chrono::seconds>(*i.dedupeWindow).count()
                          : static_cast<int64_t>(tier) * 24 * 3600;
    windows.push_back({i.id, seconds});
  }
  auto alive = alive_;
  retention_.purgeDedupeKeys(
      std::move(windows), kOthersSeconds, [this, alive, run, cb](Result<int64_t> n) {
        if (!*alive) return;
        if (!n) return cb(n.error());
        run->dedupeKeysPurged = *n;
        retention_.countHeld([this, alive, run, cb](Result<store::HeldCounts> h) {
          if (!*alive) return;
          if (!h) return cb(h.error());
          held_ = *h;
          run->held = *h;
          cb(std::move(*run));
        });
      });
}

std::optional<api::HeldInfo> RetentionJob::heldInfo() const {
  if (!held_) return std::nullopt;
  return api::HeldInfo{held_->pending,    held_->quarantined, held_->finished,
                       held_->deliveries, held_->bytes,       movedTotal_};
}

void RetentionJob::confirmed(int64_t interfaceId, store::Tier tier) {
  applied_[interfaceId] = tier;
}

// The tiers as the database has them now (a confirmation from the command
// line or another engine shows at once), then the partitions.
void RetentionJob::describe(std::function<void(Result<api::RetentionInfo>)> cb) {
  std::vector<store::InterfaceTier> list;
  for (auto& i : interfaces_) list.push_back({i.id, i.name, i.configured});
  auto alive = alive_;
  reader_.readTiers(
      std::move(list), [this, alive, cb](Result<std::vector<store::TierState>> tiers) {
        if (!*alive) return;
        if (!tiers) return cb(tiers.error());
        api::RetentionInfo out;
        for (auto& t : *tiers) {
          api::RetentionInterfaceInfo f;
          f.interface = t.name;
          f.configured = store::tierName(t.configured);
          f.applied = store::tierName(t.applied);
          f.change = changeName(t.change);
          f.requestedAt = t.requestedAt;
          for (auto& i : interfaces_)
            if (i.id == t.interfaceId) f.quarantined = i.purgeQuarantined ? "purge" : "keep";
          out.interfaces.push_back(std::move(f));
        }
        reader_.plan([this, alive, out = std::move(out),
                      cb](Result<store::RetentionPlan> plan) mutable {
          if (!*alive) return;
          if (!plan) return cb(plan.error());
          for (auto& p : plan->periods)
            out.periods.push_back({store::tierName(p.tier), p.from, p.to, p.dropsOn, p.expired,
                                   p.messages, p.deliveries, p.bytes, p.unfinished, p.detached});
          out.held = heldInfo();
          out.lastRun = lastRun_;
          cb(std::move(out));
        });
      });
}

}  // namespace ductus::supervisor
