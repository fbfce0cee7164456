#include "supervisor/ownership.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "api/engine_view.h"
#include "common/log.h"
#include "common/version.h"
#include "schema/conninfo.h"

namespace ductus::supervisor {
namespace {

uint64_t random64() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

// Positive, so both halves of the key fit pg_locks' oid columns as they are.
int64_t randomLockKey() {
  auto k = static_cast<int64_t>(random64() >> 1);
  return k ? k : 1;
}

std::string randomEngineId() {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(random64()));
  return buf;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

template <typename F>
void startTimer(UvHandle<uv_timer_t>& t, std::chrono::milliseconds after, F fn) {
  uv_timer_start(t.get(), fn, static_cast<uint64_t>(after.count()), 0);
}

}  // namespace

Ownership::Ownership(uv_loop_t* loop, std::string conninfo, OwnershipTiming timing)
    : loop_(loop), conninfo_(std::move(conninfo)), timing_(timing) {
  me_.id = randomEngineId();
  me_.host = hostName();
  me_.pid = static_cast<int64_t>(getpid());
  me_.version = kVersion;
  checkTimer_ = makeTimer(loop_, this);
  timeoutTimer_ = makeTimer(loop_, this);
  retakeTimer_ = makeTimer(loop_, this);
}

Ownership::~Ownership() { *alive_ = false; }

std::vector<std::string> Ownership::owned() const {
  std::vector<std::string> out;
  for (auto& i : interfaces_) out.push_back(i.name);
  std::sort(out.begin(), out.end());
  return out;
}

void Ownership::describe(api::EngineInfo& e) const {
  e.engineId = me_.id;
  switch (state_) {
    case State::Starting:
      e.ownership = "starting";
      break;
    case State::Standby:
      e.ownership = "standby";
      break;
    case State::Held:
      e.ownership = "held";
      break;
    case State::Lost:
      e.ownership = "lost";
      break;
    case State::Taken:
      e.ownership = "taken";
      break;
    case State::Released:
      e.ownership = "released";
      break;
  }
  for (auto& o : others_)
    e.otherEngines.push_back({o.id, o.host, o.version, o.pid, o.startedAt, o.interfaces});
}

void Ownership::takeLock(std::function<void(Status)> done) {
  // Keepalives shorter than the other connections': a database host that
  // vanishes is noticed in ~25 s even by the kernel, not only by the check.
  auto conninfo =
      store::withConninfoDefaults(conninfo_, {{"keepalives", "1"},
                                              {"keepalives_idle", "10"},
                                              {"keepalives_interval", "5"},
                                              {"keepalives_count", "3"},
                                              {"application_name", "ductus ownership"}});
  if (!conninfo) return done(conninfo.error());
  conn_ = std::make_unique<store::PgConnection>(loop_);
  auto alive = alive_;
  conn_->connect(*conninfo, [this, alive, done](Status s) {
    if (!*alive) return;
    if (!s) return done(s);
    // The session is the lock: a server-side idle timeout would end it,
    // and a vanished host's must end (store::kServerSideKeepalives) so a
    // standby can take over. Through pg_settings: a server before 14 has
    // no idle_session_timeout.
    conn_->query(std::string("SELECT set_config(name, '0', false) FROM pg_settings WHERE name = "
                             "'idle_session_timeout' UNION ALL ") +
                     store::kServerSideKeepalives,
                 {}, [this, alive, done](Result<store::PgResult> r) {
                   if (!*alive) return;
                   if (!r) return done(r.error());
                   tryKey(0, done);
                 });
  });
}

void Ownership::tryKey(int attempt, std::function<void(Status)> done) {
  int64_t key = randomLockKey();
  auto alive = alive_;
  store::tryLockSession(*conn_, key, [this, alive, attempt, key, done](Result<bool> r) {
    if (!*alive) return;
    if (!r) return done(r.error());
    if (*r) {
      me_.lockKey = key;
      return done({});
    }
    // 63 random bits taken already: someone else's lock. Another key.
    if (attempt < 4) return tryKey(attempt + 1, done);
    done(Error{"no free advisory lock key after 5 tries"});
  });
}

void Ownership::claim(std::function<void(Status)> done) {
  std::vector<int64_t> ids;
  for (auto& i : interfaces_) ids.push_back(i.id);
  auto alive = alive_;
  store::claim(*conn_, me_, std::move(ids), [alive, done](Result<store::ClaimReport> r) {
    if (!*alive) return;
    if (!r) return done(r.error());
    if (r->deadEngines || r->deadClaims)
      spdlog::info(
          "ownership: {} engine(s) that stopped without releasing found dead (their "
          "lock is gone); {} claim(s) of theirs removed",
          r->deadEngines, r->deadClaims);
    if (r->conflicts.empty()) return done({});
    std::string text;
    for (auto& c : r->conflicts) text += (text.empty() ? "" : "\n") + store::describeConflict(c);
    done(Error{text, ErrorKind::OwnedElsewhere});
  });
}

void Ownership::firstLock(std::function<void(Status)> done) {
  if (firstLock_) return done(*firstLock_);
  afterFirstLock_.push_back(std::move(done));
  if (std::exchange(firstLockAsked_, true)) return;
  auto alive = alive_;
  takeLock([this, alive](Status s) {
    if (!*alive) return;
    firstLock_ = s;
    for (auto& f : std::exchange(afterFirstLock_, {})) f(s);
  });
}

void Ownership::lockAhead() {
  firstLock([](Status) {});
}

void Ownership::afterLock(std::vector<OwnedInterface> interfaces, std::function<void(Status)> done,
                          std::function<void()> then) {
  interfaces_ = std::move(interfaces);
  // The lock taken ahead may have failed, or its connection broken since
  // (a long migration, a database restart): taken again, not trusted.
  if (firstLock_ && (!firstLock_->ok() || !conn_ || conn_->broken())) {
    firstLock_.reset();
    firstLockAsked_ = false;
  }
  auto alive = alive_;
  firstLock([alive, done, then](Status s) {
    if (!*alive) return;
    if (!s)
      return done(Error{"taking the ownership lock: " + s.error().message, s.error().kind,
                        s.error().sqlstate});
    then();
  });
}

void Ownership::start(std::vector<OwnedInterface> interfaces, std::function<void(Status)> done) {
  afterLock(std::move(interfaces), done, [this, done] { takeCharge(done); });
}

void Ownership::takeCharge(std::function<void(Status)> done) {
  auto alive = alive_;
  claim([this, alive, done](Status s) {
    if (!*alive) return;
    if (!s) return done(s);
    guardLanes(true, [this, alive, done](Status s) {
      if (!*alive) return;
      if (!s) return done(s);
      state_ = State::Held;
      spdlog::info("ownership: engine {} (host {}, pid {}) owns {} interface(s)", me_.id,
                   me_.host, me_.pid, interfaces_.size());
      done({});
    });
  });
}

void Ownership::guardLanes(bool releaseOnRefusal, std::function<void(Status)> done) {
  std::vector<store::LaneCount> counts;
  for (auto& i : interfaces_) counts.push_back({i.name, i.partitions});
  auto alive = alive_;
  store::strandedLanes(
      *conn_, counts,
      [this, alive, done, counts, releaseOnRefusal](Result<std::vector<store::StrandedLane>> r) {
        if (!*alive) return;
        if (!r)
          return done(Error{"checking the lanes: " + r.error().message, r.error().kind,
                            r.error().sqlstate});
        if (r->empty()) return done({});
        std::string text;
        for (auto& l : store::describeStranded(*r, counts)) text += (text.empty() ? "" : "\n") + l;
        if (!releaseOnRefusal) return done(Error{text, ErrorKind::Stranded});
        // Nothing will run: the claims go now rather than wait to be
        // found dead.
        store::release(*conn_, me_.id, [alive, done, text](Status) {
          if (*alive) done(Error{text, ErrorKind::Stranded});
        });
      });
}

void Ownership::prepare(std::vector<OwnedInterface> interfaces, std::string predecessor,
                        std::function<void(Status)> done) {
  auto alive = alive_;
  afterLock(std::move(interfaces), done, [this, alive, done, predecessor] {
    // Claiming nothing records this engine (and clears dead ones' rows).
    store::claim(*conn_, me_, {}, [this, alive, done, predecessor](Result<store::ClaimReport> r) {
      if (!*alive) return;
      if (!r) return done(r.error());
      store::liveEngines(
          *conn_, me_.id,
          [this, alive, done, predecessor](Result<std::vector<store::LiveEngine>> r) {
            if (!*alive) return;
            if (!r) return done(r.error());
            std::string text;
            for (auto& e : *r) {
              if (e.id == predecessor) continue;
              for (auto& i : interfaces_)
                if (std::find(e.interfaces.begin(), e.interfaces.end(), i.name) !=
                    e.interfaces.end())
                  text += (text.empty() ? "" : "\n") + i.name + " is owned by engine " + e.id +
                          " (host " + e.host + ", pid " + std::to_string(e.pid) + ", version " +
                          e.version + ", started " + e.startedAt + ")";
            }
            if (!text.empty()) return done(Error{text, ErrorKind::OwnedElsewhere});
            others_ = std::move(*r);
            guardLanes(false, done);
          });
    });
  });
}

void Ownership::record(std::function<void(Status)> done) {
  auto alive = alive_;
  store::claim(*conn_, me_, {}, [this, alive, done](Result<store::ClaimReport> r) {
    if (!*alive) return;
    if (!r) return done(r.error());
    readOthers(done);
  });
}

void Ownership::readOthers(std::function<void(Status)> done) {
  auto alive = alive_;
  store::liveEngines(*conn_, me_.id, [this, alive, done](Result<std::vector<store::LiveEngine>> r) {
    if (!*alive) return;
    if (!r) return done(r.error());
    others_ = std::move(*r);
    done({});
  });
}

void Ownership::standBy(std::vector<OwnedInterface> interfaces, std::function<void(Status)> done) {
  auto alive = alive_;
  afterLock(std::move(interfaces), done, [this, alive, done] {
    record([this, alive, done](Status s) {
      if (!*alive) return;
      if (!s) return done(s);
      guardLanes(false, [this, alive, done](Status s) {
        if (!*alive) return;
        if (s) state_ = State::Standby;
        done(s);
      });
    });
  });
}

void Ownership::tryCharge(std::function<void(Result<bool>)> done) {
  auto alive = alive_;
  // The wait may be long: a lock connection the database or the network
  // ended meanwhile is made again (a new key) before claiming on it. The
  // owner lost its session too, then: its grace starts again.
  if (!conn_ || conn_->broken()) {
    ownerGoneSince_.reset();
    return takeLock([this, alive, done](Status s) {
      if (!*alive) return;
      if (!s)
        return done(Error{"taking the ownership lock again: " + s.error().message, s.error().kind,
                          s.error().sqlstate});
      record([this, alive, done](Status s) {
        if (!*alive) return;
        if (!s) return done(s.error());
        tryCharge(done);
      });
    });
  }
  // Read-only first: a claim removes the rows of an engine whose lock is
  // gone, and an owner whose lock went for a moment (its check timed out,
  // the database restarted) takes it again retakeEvery later; finding its
  // interfaces taken, it would exit 3. So an owner is taken over only once
  // it has looked gone for standbyGrace.
  readOthers([this, alive, done](Status s) {
    if (!*alive) return;
    if (!s) return done(s.error());
    bool owned = false;
    for (auto& e : others_)
      for (auto& i : interfaces_)
        if (std::find(e.interfaces.begin(), e.interfaces.end(), i.name) != e.interfaces.end())
          owned = true;
    auto now = std::chrono::steady_clock::now();
    if (owned) {
      ownerGoneSince_.reset();
      return done(false);
    }
    if (!ownerGoneSince_) ownerGoneSince_ = now;
    if (now - *ownerGoneSince_ < timing_.standbyGrace) return done(false);
    claim([this, alive, done](Status s) {
      if (!*alive) return;
      // Another standby won the claim meanwhile.
      if (!s && s.error().kind == ErrorKind::OwnedElsewhere) {
        ownerGoneSince_.reset();
        return done(false);
      }
      if (!s) return done(s.error());
      guardLanes(true, [this, alive, done](Status s) {
        if (!*alive) return;
        if (!s) return done(s.error());
        state_ = State::Held;
        spdlog::info(
            "ownership: engine {} (host {}, pid {}) owns {} interface(s), after standing by",
            me_.id, me_.host, me_.pid, interfaces_.size());
        done(true);
      });
    });
  });
}

void Ownership::monitor(Hooks hooks) {
  hooks_ = std::move(hooks);
  uv_timer_start(
      checkTimer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<Ownership*>(t->data)) self->check();
      },
      0, static_cast<uint64_t>(timing_.checkEvery.count()));
}

void Ownership::check() {
  if (state_ != State::Held || checkSeq_ || !conn_) return;
  uint64_t seq = checkSeq_ = ++lastCheck_;
  startTimer(timeoutTimer_, timing_.checkTimeout, [](uv_timer_t* t) {
    if (auto* self = static_cast<Ownership*>(t->data)) self->onCheckTimeout();
  });
  auto alive = alive_;
  store::liveEngines(*conn_, me_.id, [this, alive, seq](Result<std::vector<store::LiveEngine>> r) {
    if (!*alive || seq != checkSeq_) return;
    checkSeq_ = 0;
    uv_timer_stop(timeoutTimer_.get());
    if (!r) return lose(r.error().message);
    others_ = std::move(*r);
  });
}

void Ownership::onCheckTimeout() {
  if (state_ != State::Held || !checkSeq_) return;
  lose("the lock connection did not answer within " + std::to_string(timing_.checkTimeout.count()) +
       " ms");
}

void Ownership::lose(const std::string& why) {
  state_ = State::Lost;
  checkSeq_ = 0;
  uv_timer_stop(timeoutTimer_.get());
  // Closing the session gives its lock back, if the server still has it:
  // from here on another engine may find this one dead and take over.
  conn_.reset();
  retakeFailures_ = 0;
  spdlog::error(
      "ownership: lost the lock ({}): delivery, files and schedules pause, intake "
      "keeps storing; taking the lock again",
      why);
  if (hooks_.lost) hooks_.lost();
  if (!*alive_) return;
  startTimer(retakeTimer_, timing_.retakeEvery, [](uv_timer_t* t) {
    if (auto* self = static_cast<Ownership*>(t->data)) self->retake();
  });
}

void Ownership::retake() {
  if (state_ != State::Lost) return;
  auto alive = alive_;
  auto again = [this](const Error& e) {
    conn_.reset();
    // Said at once, then once a minute while the database stays away.
    int perMinute = static_cast<int>(std::max<int64_t>(1, 60'000 / timing_.retakeEvery.count()));
    if (retakeFailures_++ % perMinute == 0)
      spdlog::warn("ownership: taking the lock again failed: {}; trying again", e.message);
    startTimer(retakeTimer_, timing_.retakeEvery, [](uv_timer_t* t) {
      if (auto* self = static_cast<Ownership*>(t->data)) self->retake();
    });
  };
  takeLock([this, alive, again](Status s) {
    if (!*alive || state_ != State::Lost) return;
    if (!s) return again(s.error());
    claim([this, alive, again](Status s) {
      if (!*alive || state_ != State::Lost) return;
      if (!s && s.error().kind == ErrorKind::OwnedElsewhere) {
        state_ = State::Taken;
        conn_.reset();
        spdlog::error(
            "ownership: while the lock was lost another engine claimed this one's "
            "interfaces:");
        std::string_view lines = s.error().message;
        while (!lines.empty()) {
          size_t nl = lines.find('\n');
          spdlog::error("  {}", lines.substr(0, nl));
          lines = nl == lines.npos ? std::string_view() : lines.substr(nl + 1);
        }
        if (hooks_.taken) hooks_.taken(s.error());
        return;
      }
      if (!s) return again(s.error());
      state_ = State::Held;
      spdlog::info(
          "ownership: lock taken again, the claims are still this engine's: delivery, "
          "files and schedules resume");
      if (hooks_.regained) hooks_.regained();
    });
  });
}

void Ownership::release(std::function<void()> done) {
  uv_timer_stop(checkTimer_.get());
  uv_timer_stop(retakeTimer_.get());
  uv_timer_stop(timeoutTimer_.get());
  checkSeq_ = 0;
  bool held = (state_ == State::Held || state_ == State::Standby) && conn_;
  state_ = State::Released;
  if (!held) {
    conn_.reset();
    return done();
  }
  releaseDone_ = std::move(done);
  startTimer(timeoutTimer_, timing_.checkTimeout, [](uv_timer_t* t) {
    auto* self = static_cast<Ownership*>(t->data);
    if (!self) return;
    spdlog::warn(
        "ownership: releasing the claims took longer than {} ms; closing the lock "
        "connection (the next start finds them dead)",
        self->timing_.checkTimeout.count());
    self->finishRelease();
  });
  auto alive = alive_;
  store::release(*conn_, me_.id, [this, alive](Status s) {
    if (!*alive || !releaseDone_) return;
    if (!s)
      spdlog::warn("ownership: releasing the claims failed: {}", s.error().message);
    else
      spdlog::info("ownership: claims released");
    finishRelease();
  });
}

void Ownership::finishRelease() {
  auto done = std::move(releaseDone_);
  releaseDone_ = nullptr;
  if (!done) return;
  uv_timer_stop(timeoutTimer_.get());
  conn_.reset();  // closing the session releases the lock
  done();
}

}  // namespace ductus::supervisor
