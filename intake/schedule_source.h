// ScheduleSource: a `schedule:` source. `every` runs at start and then every
// interval; `cron` runs at its next time (server local time). Each run
// stores {"due", "previous"} with the schedule's state in one transaction,
// unless a run of this interface is still pending (then it is skipped).
// Runs missed while the engine was down collapse into one run at start.
// The timer re-checks the clock at least every minute, so a clock step or a
// suspended machine is noticed.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "common/config/model.h"
#include "common/cron.h"
#include "common/result.h"
#include "common/uv_handle.h"

namespace ductus::intake {
class Intake;
}

namespace ductus::intake {

class ScheduleSource {
 public:
  using Clock = std::chrono::system_clock;
  // Where the source reads the time: the system clock, or a test's (a cron
  // schedule's next minute without waiting a real one). The loop's timer
  // still waits in real time, as long as this clock says is left.
  using Now = std::function<Clock::time_point()>;
  static Result<std::unique_ptr<ScheduleSource>> make(uv_loop_t* loop, Intake& intake,
                                                      const config::ScheduleSource& cfg,
                                                      Now now = Clock::now);
  ~ScheduleSource();

  // No run fires until resume() (the engine lost its ownership lock); a
  // run that fell due meanwhile fires at resume(), as one.
  void pause();
  void resume();
  bool paused() const { return paused_; }

 private:
  ScheduleSource(Intake& intake, Now now)
      : intake_(intake), now_(std::move(now)) {}
  void begin();
  void arm();
  void tick();
  void fire(Clock::time_point due);
  Clock::time_point nextAfter(Clock::time_point t) const;

  Intake& intake_;
  Now now_;
  std::optional<std::chrono::milliseconds> every_;
  std::optional<Cron> cron_;
  std::optional<Clock::time_point> previous_;
  Clock::time_point due_;
  bool busy_ = false;
  bool paused_ = false;
  bool idle_ = false;  // paused when its timer went off
  UvHandle<uv_timer_t> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::intake
