#include "worker/watchdog.h"

namespace ductus::worker {

Watchdog::Watchdog(v8::Isolate* isolate) : isolate_(isolate), thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Watchdog::arm(Clock::time_point deadline) {
  fired_.store(false, std::memory_order_relaxed);
  deadlineNs_.store(deadline.time_since_epoch().count(), std::memory_order_relaxed);
  armed_.store(++nextGeneration_, std::memory_order_release);
}

void Watchdog::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, kTick);
    uint64_t gen = armed_.load(std::memory_order_acquire);
    if (gen == 0 || requested_.load(std::memory_order_relaxed) == gen) continue;
    if (Clock::now().time_since_epoch().count() < deadlineNs_.load(std::memory_order_relaxed))
      continue;
    requested_.store(gen, std::memory_order_release);
    isolate_->RequestInterrupt(&Watchdog::onInterrupt, this);
  }
}

void Watchdog::onInterrupt(v8::Isolate* isolate, void* data) {
  auto* self = static_cast<Watchdog*>(data);
  // Still the arming the request was made for? Otherwise the call it was
  // meant for has finished and this is someone else's code.
  uint64_t gen = self->armed_.load(std::memory_order_acquire);
  if (gen == 0 || gen != self->requested_.load(std::memory_order_acquire)) return;
  self->fired_.store(true, std::memory_order_release);
  isolate->TerminateExecution();
}

}  // namespace ductus::worker
