// Outbox: sends the notifications alert steps wrote (alert_deliveries),
// at least once, like deliveries. Every 5 s, and at once when a round
// wrote some, it claims due rows with FOR UPDATE SKIP LOCKED and a
// two-minute lease (schema/alert_store.h), so two engines on one
// database never both send a row while its lease holds; each is sent on
// its own (alerts::Notifier) and marked sent, or failed and due again
// after a back-off of 30 s doubling to an hour; after ten tries it is
// given up, logged as an error. A claim that dies with its engine is
// claimable again when the lease ends.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "common/uv_handle.h"

namespace ductus::store {
class PgPool;
}
namespace ductus::supervisor::alerts {
class Notifier;
}

namespace ductus::supervisor {

class Outbox {
 public:
  struct Options {
    std::chrono::milliseconds every = std::chrono::seconds(5);
    std::chrono::seconds lease = std::chrono::seconds(120);
    std::chrono::seconds firstRetry = std::chrono::seconds(30);
    std::chrono::seconds lastRetry = std::chrono::seconds(3600);
    int maxAttempts = 10;
    int batch = 20;
  };
  Outbox(uv_loop_t* loop, store::PgPool& pool, alerts::Notifier& notifier, Options options);
  ~Outbox();
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  void start();
  // Claims now (a round wrote notifications).
  void wake();

  uint64_t sent() const { return sent_; }
  uint64_t failed() const { return failed_; }
  // The wait before the next try after `attempts` failed ones.
  static std::chrono::seconds backoff(int attempts, const Options& o);

 private:
  void claim();

  uv_loop_t* loop_;
  store::PgPool& pool_;
  alerts::Notifier& notifier_;
  Options options_;
  bool busy_ = false, again_ = false;
  uint64_t sent_ = 0, failed_ = 0;
  UvHandle<uv_timer_t> timer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
