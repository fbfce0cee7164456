// TrafficRollup: the counts of the last minute into the database, once a
// minute, for the console's charts (table traffic_minutes,
// schema/traffic_store.h).
//
// Intake and the delivery loops already count received / sent / filtered /
// quarantined in memory (delivery::InterfaceActivity: atomics, no write).
// At each minute's turn this takes the difference since the last turn for
// every interface and destination and adds the non-zero ones in one
// statement, whatever the volume: 10 messages a minute or 100,000 cost the
// database the same one write. A write that fails keeps its rows for the
// next turn (at most an hour of them: past that the oldest are dropped and
// logged); one in flight is not doubled. The stop adds the minute in
// progress. Once an hour it deletes rows past store::kTrafficKeep.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "common/uv_handle.h"
#include "schema/traffic_store.h"

namespace ductus::store {
class PgPool;
}
namespace ductus::delivery {
struct InterfaceActivity;
}

namespace ductus::supervisor {

class TrafficRollup {
 public:
  struct Watched {
    int64_t interfaceId = 0;
    delivery::InterfaceActivity* activity = nullptr;
    std::vector<int64_t> destinationIds;  // as activity->destinations lists them; 0: none
  };
  // A turn every `every`, at its multiples since the epoch (a minute: at
  // each minute's :00, so a row is that minute's).
  TrafficRollup(uv_loop_t* loop, store::PgPool& pool, std::vector<Watched> watched,
                std::chrono::seconds every = std::chrono::seconds(60));
  ~TrafficRollup();
  TrafficRollup(const TrafficRollup&) = delete;
  TrafficRollup& operator=(const TrafficRollup&) = delete;

  // Counts from here; the first row is written at the next turn.
  void start();
  // Adds what was counted since the last turn to the minute in progress,
  // then calls done (written or not).
  void flushNow(std::function<void()> done);

  // The interface's rows not in the database yet: those a failed write
  // kept, and what was counted since the last turn (as the minute in
  // progress).
  std::vector<store::TrafficRow> unsaved(int64_t interfaceId) const;

  uint64_t writes() const { return writes_; }

 private:
  struct Counted {
    int64_t interfaceId = 0, destinationId = 0;  // destination 0: the intake
    const std::atomic<int64_t>* received = nullptr;
    const std::atomic<int64_t>* sent = nullptr;
    const std::atomic<int64_t>* filtered = nullptr;
    const std::atomic<int64_t>* quarantined = nullptr;
    int64_t lastReceived = 0, lastSent = 0, lastFiltered = 0, lastQuarantined = 0;
  };
  using Key = std::tuple<int64_t, int64_t, int64_t>;  // interface, destination, minute

  static store::TrafficRow sinceLastTurn(const Counted& c, int64_t minute);
  void addPending(const store::TrafficRow& row);
  void arm();
  void turn();
  void collect(int64_t minute);
  void write(std::function<void()> then);

  uv_loop_t* loop_;
  store::PgPool& pool_;
  std::chrono::seconds every_;
  std::vector<Counted> counted_;
  std::map<Key, store::TrafficRow> pending_;
  bool writing_ = false;
  std::function<void()> afterWrite_;  // flushNow() during a write
  uint64_t turns_ = 0;
  uint64_t writes_ = 0;
  UvHandle<uv_timer_t> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
