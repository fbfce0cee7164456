// LoopThread: a libuv loop running on its own thread, so a test can drive
// real blocking client sockets from the test thread while the server side
// runs on the loop. Everything that touches loop objects goes through
// run(), which executes on the loop thread and waits for it.
#pragma once

#include <uv.h>

#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <thread>

namespace ductus::test {

class LoopThread {
 public:
  LoopThread() {
    uv_loop_init(&loop_);
    async_.data = this;
    uv_async_init(&loop_, &async_, &LoopThread::onAsync);
    thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
  }
  ~LoopThread() {
    post([this] {
      // Close whatever a failed test left open, so the loop can end; an
      // after() timer that never fired frees its function too.
      uv_walk(
          &loop_,
          [](uv_handle_t* h, void*) {
            if (uv_is_closing(h)) return;
            uv_close(h, forgetTimer(h) ? &deleteTimer : nullptr);
          },
          nullptr);
    });
    thread_.join();
    uv_loop_close(&loop_);
  }
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  uv_loop_t* loop() { return &loop_; }

  // Runs fn on the loop thread and waits until it has run.
  void run(std::function<void()> fn) {
    std::promise<void> done;
    auto f = done.get_future();
    post([&] {
      fn();
      done.set_value();
    });
    f.wait();
  }

  // Runs fn on the loop thread later, without waiting.
  void post(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(fn));
    }
    uv_async_send(&async_);
  }

  // Runs fn on the loop thread after ms milliseconds (call on the loop thread).
  static void after(uv_loop_t* loop, uint64_t ms, std::function<void()> fn) {
    auto* timer = new Timer{{}, std::move(fn)};  // freed in the close callback
    uv_timer_init(loop, &timer->t);
    timer->t.data = timer;
    {
      std::lock_guard lock(timersMu());
      timers().insert(reinterpret_cast<uv_handle_t*>(&timer->t));
    }
    uv_timer_start(
        &timer->t,
        [](uv_timer_t* t) {
          auto* self = static_cast<Timer*>(t->data);
          self->fn();
          auto* h = reinterpret_cast<uv_handle_t*>(t);
          forgetTimer(h);
          uv_close(h, &deleteTimer);
        },
        ms, 0);
  }

 private:
  struct Timer {
    uv_timer_t t;
    std::function<void()> fn;
  };
  // after()'s timers still pending, across every LoopThread, so a loop
  // closed before one fired (the test ended first) still frees it.
  static std::set<uv_handle_t*>& timers() {
    static std::set<uv_handle_t*> pending;
    return pending;
  }
  static std::mutex& timersMu() {
    static std::mutex mu;
    return mu;
  }
  static bool forgetTimer(uv_handle_t* h) {
    std::lock_guard lock(timersMu());
    return timers().erase(h) > 0;
  }
  static void deleteTimer(uv_handle_t* h) { delete static_cast<Timer*>(h->data); }

  static void onAsync(uv_async_t* a) {
    auto* self = static_cast<LoopThread*>(a->data);
    std::deque<std::function<void()>> tasks;
    {
      std::lock_guard lock(self->mu_);
      tasks.swap(self->tasks_);
    }
    for (auto& t : tasks) t();
  }

  uv_loop_t loop_;
  uv_async_t async_;
  std::mutex mu_;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;
};

}  // namespace ductus::test
