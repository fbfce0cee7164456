// Threads of ours that run detached because their owner must never wait
// for a blocking call (an SFTP session's, a SQL Server connection's): the
// owner goes at once, the thread finishes its call and ends on its own.
// At exit the process must still wait for them, briefly: exit() runs
// OpenSSL's atexit cleanup, and a thread still closing its session would
// then use a library that is gone (a crash after "stopped").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace ductus {

class DetachedThreads {
 public:
  // Held for the whole life of a detached thread's body.
  class Running {
   public:
    Running() {
      std::lock_guard lock(state().mutex);
      ++state().running;
    }
    ~Running() {
      std::lock_guard lock(state().mutex);
      if (--state().running == 0) state().ended.notify_all();
    }
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
  };

  // True when none runs (any more) within `limit`; else how many still do
  // is in running().
  static bool waitForAll(std::chrono::milliseconds limit) {
    std::unique_lock lock(state().mutex);
    return state().ended.wait_for(lock, limit, [] { return state().running == 0; });
  }
  static size_t running() {
    std::lock_guard lock(state().mutex);
    return state().running;
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable ended;
    size_t running = 0;
  };
  // Never destroyed: a thread may end after static destructors have run.
  static State& state() {
    static State* s = new State;
    return *s;
  }
};

}  // namespace ductus
