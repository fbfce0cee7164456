#include "intake/schedule_source.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "intake/intake.h"

namespace ductus::intake {
namespace {

constexpr const char* kStateKey = "schedule";

int64_t toMs(ScheduleSource::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::string iso(ScheduleSource::Clock::time_point t) {
  std::time_t s = ScheduleSource::Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Result<std::unique_ptr<ScheduleSource>> ScheduleSource::make(uv_loop_t* loop,
                                                             Intake& intake,
                                                             const config::ScheduleSource& cfg,
                                                             Now now) {
  std::unique_ptr<ScheduleSource> s(new ScheduleSource(intake, std::move(now)));
  if (cfg.every) {
    if (cfg.every->count() <= 0) return Error{"schedule: every must be positive"};
    s->every_ = *cfg.every;
  } else {
    auto c = parseCron(cfg.cron);
    if (!c) return Error{"schedule: cron: " + c.error().message};
    s->cron_ = std::move(*c);
  }
  s->timer_ = makeTimer(loop, s.get());
  s->begin();
  return s;
}

ScheduleSource::~ScheduleSource() { *alive_ = false; }

ScheduleSource::Clock::time_point ScheduleSource::nextAfter(Clock::time_point t) const {
  if (every_) return t + *every_;
  return cron_->next(t);
}

void ScheduleSource::begin() {
  auto alive = alive_;
  intake_.sourceState(
      kStateKey,
      [this, alive](Result<std::optional<std::string>> r) {
        if (!*alive) return;
        if (r && *r) {
          auto j = nlohmann::json::parse(**r, nullptr, false);
          if (!j.is_discarded() && j.contains("previous") && j["previous"].is_number())
            previous_ = Clock::time_point(std::chrono::milliseconds(j["previous"].get<int64_t>()));
        }
        auto now = now_();
        if (every_) {
          due_ = now;  // every: runs at start
        } else if (previous_ && nextAfter(*previous_) <= now) {
          due_ = now;  // missed cron runs collapse into one
        } else {
          due_ = nextAfter(now);
        }
        if (due_ == Clock::time_point::max())
          spdlog::error(
              "{}: schedule: cron \"{}\" never fires in this server's time zone: every "
              "time it names is skipped when the clock springs forward; name another "
              "hour or day",
              intake_.spec().name, cron_->text());
        arm();
      });
}

void ScheduleSource::arm() {
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(due_ - now_());
  auto ms = std::clamp<int64_t>(wait.count(), 0, 60'000);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<ScheduleSource*>(t->data)) self->tick();
      },
      static_cast<uint64_t>(ms), 0);
}

void ScheduleSource::pause() { paused_ = true; }

void ScheduleSource::resume() {
  paused_ = false;
  if (!idle_) return;  // its timer still runs, or a run is under way
  idle_ = false;
  tick();
}

void ScheduleSource::tick() {
  if (busy_) return;
  if (paused_) {
    idle_ = true;  // the timer stops here; resume() ticks
    return;
  }
  if (now_() < due_) return arm();
  fire(due_);
}

void ScheduleSource::fire(Clock::time_point due) {
  busy_ = true;
  auto alive = alive_;
  const std::string& name = intake_.spec().name;
  intake_.hasPending([this, alive, due, name](Result<bool> pending) {
    if (!*alive) return;
    auto advance = [this](Clock::time_point from) {
      busy_ = false;
      due_ = nextAfter(from);
      auto now = now_();
      if (due_ <= now) due_ = every_ ? now + *every_ : nextAfter(now);
      arm();
    };
    if (!pending) {
      spdlog::warn("{}: schedule: checking for a pending run failed: {}", name,
                   pending.error().message);
      busy_ = false;
      due_ = now_() + std::chrono::seconds(5);
      return arm();
    }
    if (*pending) {
      spdlog::info("{}: schedule: run due {} skipped, the previous run is still pending", name,
                   iso(due));
      return advance(due);
    }
    nlohmann::json payload;
    payload["due"] = iso(due);
    payload["previous"] = previous_ ? nlohmann::json(iso(*previous_)) : nlohmann::json(nullptr);
    nlohmann::json state{{"previous", toMs(due)}};
    intake_.acceptBatch(
        {payload.dump()}, store::SourceStateWrite{kStateKey, state.dump()},
        [this, alive, due, name, advance](Result<store::BatchStored> r) {
          if (!*alive) return;
          if (!r) {
            spdlog::warn("{}: schedule: storing the run due {} failed: {}; trying again", name,
                         iso(due), r.error().message);
            busy_ = false;
            due_ = now_() + std::chrono::seconds(5);
            return arm();
          }
          previous_ = due;
          advance(due);
        });
  });
}

}  // namespace ductus::intake
