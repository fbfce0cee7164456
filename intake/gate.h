// Gate: whether an interface may store new messages, and how many stores
// are in flight. A source takes a Pass before storing and drops it once the
// sender has been answered; closing the gate refuses new passes, and the
// stop waits (onDrained) until every pass is gone, so no message that was
// being stored is left unanswered.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace ductus::intake {

class Gate : public std::enable_shared_from_this<Gate> {
 public:
  class Pass {
   public:
    Pass(Pass&&) noexcept = default;
    Pass& operator=(Pass&&) noexcept = default;
    ~Pass();

   private:
    friend class Gate;
    explicit Pass(std::shared_ptr<Gate> g) : gate_(std::move(g)) {}
    std::shared_ptr<Gate> gate_;
  };

  static std::shared_ptr<Gate> make() { return std::shared_ptr<Gate>(new Gate()); }

  // A pass while the gate is open; nullopt when closed.
  std::optional<Pass> enter();
  bool open() const { return open_; }
  size_t inFlight() const { return inFlight_; }

  void close() { open_ = false; }
  void reopen() { open_ = true; }
  // Runs cb once no pass is out (at once if none is).
  void onDrained(std::function<void()> cb);

 private:
  Gate() = default;
  void leave();
  bool open_ = true;
  size_t inFlight_ = 0;
  std::vector<std::function<void()>> drained_;
};

}  // namespace ductus::intake
