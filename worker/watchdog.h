// The worker's watchdog: a thread that stops script code running past its
// deadline. The main thread arms it around every entry into JavaScript and
// disarms it after; past the deadline the watchdog asks V8 for an interrupt,
// and the interrupt (which runs on the isolate's thread, inside the running
// code) terminates execution only if the same arming is still in force. A
// call that finished in the meantime can therefore never be hit.
#pragma once

#include <v8.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace ductus::worker {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Watchdog(v8::Isolate* isolate);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void arm(Clock::time_point deadline);
  void disarm() { armed_.store(0, std::memory_order_release); }

  // True once the interrupt has terminated the current arming; cleared by
  // arm().
  bool fired() const { return fired_.load(std::memory_order_acquire); }

 private:
  void run();
  static void onInterrupt(v8::Isolate* isolate, void* data);

  // Checks every kTick: a deadline is met within a few milliseconds, and
  // arming costs two atomic stores instead of a wake-up per call.
  static constexpr std::chrono::milliseconds kTick{5};

  v8::Isolate* isolate_;
  std::atomic<uint64_t> armed_{0};       // generation armed now; 0 = disarmed
  std::atomic<int64_t> deadlineNs_{0};   // of the armed generation
  std::atomic<uint64_t> requested_{0};   // generation an interrupt was asked for
  std::atomic<bool> fired_{false};
  uint64_t nextGeneration_ = 0;          // main thread only

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ductus::worker
