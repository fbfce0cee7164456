#include "intake/gate.h"

namespace ductus::intake {

Gate::Pass::~Pass() {
  if (gate_) gate_->leave();
}

std::optional<Gate::Pass> Gate::enter() {
  if (!open_) return std::nullopt;
  ++inFlight_;
  return Pass(shared_from_this());
}

void Gate::leave() {
  if (--inFlight_ == 0 && !drained_.empty()) {
    auto cbs = std::move(drained_);
    drained_.clear();
    for (auto& cb : cbs) cb();
  }
}

void Gate::onDrained(std::function<void()> cb) {
  if (inFlight_ == 0) return cb();
  drained_.push_back(std::move(cb));
}

}  // namespace ductus::intake
