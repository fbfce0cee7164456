// ActivityKeeper: last activity that survives a restart, and the rates the
// diagnosis compares with their normal.
//
// Intake and the delivery loops mark last received / sent / finished /
// error in memory as they happen (delivery::Moment: no lock, no write).
// At start the keeper loads what the store kept (a time never moves back,
// so the loaded one only counts when it is newer than anything marked
// since), and every 5 s it:
//  * samples each destination's counts into a 5-minute window
//    (monitor::Window) and, when the hour of the week turns, learns the
//    hour just ended into the destination's baseline (monitor::Baseline,
//    168 values, kept in the store);
//  * saves what changed in at most two statements whatever the volume
//    (schema/activity_store.h: GREATEST, so two engines can't undo each
//    other). A save in flight is not doubled; a failed one is tried again
//    at the next tick with everything still unsaved.
// watched_since is when an engine first ran the interface: deadlines
// before it don't count.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/monitor/trends.h"
#include "common/result.h"
#include "common/uv_handle.h"

namespace ductus::store {
class PgPool;
struct ActivityRows;
}
namespace ductus::delivery {
struct InterfaceActivity;
struct DestinationActivity;
}  // namespace ductus::delivery

namespace ductus::supervisor {

class ActivityKeeper {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  struct Watched {
    int64_t interfaceId = 0;
    delivery::InterfaceActivity* activity = nullptr;
    std::vector<int64_t> destinationIds;  // as activity->destinations lists them
  };
  ActivityKeeper(uv_loop_t* loop, store::PgPool& pool, std::vector<Watched> watched,
                 std::chrono::milliseconds every = std::chrono::seconds(5));
  ~ActivityKeeper();
  ActivityKeeper(const ActivityKeeper&) = delete;
  ActivityKeeper& operator=(const ActivityKeeper&) = delete;

  // Loads the kept times and baselines, then samples and saves every
  // `every`. A load that fails is said in `done`, and the keeper runs on
  // with times from now (nothing is lost but history).
  void start(std::function<void(Status)> done);
  // Samples and saves once more (the stop's last word); done when written
  // or failed.
  void saveNow(std::function<void(Status)> done);

  // What the diagnosis reads, on the loop.
  struct DestinationTrend {
    monitor::Rates recent;
    std::optional<double> normalInPerMinute, normalSendMs;  // for this hour of the week
  };
  DestinationTrend trendOf(int64_t destinationId, TimePoint now) const;
  TimePoint watchedSince(int64_t interfaceId) const;
  uint64_t saves() const { return saves_; }

 private:
  struct Destination {
    delivery::DestinationActivity* activity = nullptr;
    int64_t id = 0;
    int64_t savedSent = 0, savedError = 0;
    monitor::Window window;
    monitor::HourLearner learner;
    monitor::Baseline inflow, sendMs;
    bool baselineDirty = false;
  };
  struct Interface {
    delivery::InterfaceActivity* activity = nullptr;
    int64_t id = 0;
    int64_t savedReceived = 0;
    TimePoint watchedSince;
    bool watchedSaved = false;
    std::vector<size_t> destinations;  // indexes into destinations_
  };

  void tick();
  void loaded(const store::ActivityRows& rows);
  void sample(TimePoint now);
  void save(std::function<void(Status)> done);

  uv_loop_t* loop_;
  store::PgPool& pool_;
  std::chrono::milliseconds every_;
  std::vector<Interface> interfaces_;
  std::vector<Destination> destinations_;
  std::map<int64_t, size_t> byDestination_, byInterface_;
  bool saving_ = false;
  std::function<void(Status)> afterSave_;  // saveNow() during a save
  uint64_t saves_ = 0;
  UvHandle<uv_timer_t> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
