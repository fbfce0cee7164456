// Countdown: runs `done` once, after every task handed out has finished.
// For a step that starts many asynchronous things and goes on when all of
// them answered (closing listeners, stopping loops, reconciling interfaces).
//
//   auto c = Countdown::make([] { next(); });
//   for (auto& l : listeners) l->close(c->add());
//   c->start();   // no more tasks: done runs now if none were added
#pragma once

#include <functional>
#include <memory>

namespace ductus {

class Countdown : public std::enable_shared_from_this<Countdown> {
  struct Key {};  // only make() constructs one: add() needs a shared owner

 public:
  static std::shared_ptr<Countdown> make(std::function<void()> done) {
    return std::make_shared<Countdown>(Key{}, std::move(done));
  }
  Countdown(Key, std::function<void()> done) : done_(std::move(done)) {}

  // One more task to wait for; call what it returns once, when it finishes.
  std::function<void()> add() {
    ++left_;
    return [self = shared_from_this()] { self->one(); };
  }
  // Every task has been handed out.
  void start() { one(); }

 private:
  void one() {
    if (--left_ == 0 && done_) {
      auto d = std::move(done_);
      done_ = nullptr;
      d();
    }
  }

  int left_ = 1;  // start() is the last one out
  std::function<void()> done_;
};

}  // namespace ductus
