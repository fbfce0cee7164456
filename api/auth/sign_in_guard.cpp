#include "api/auth/sign_in_guard.h"

#include <algorithm>

namespace ductus::api {

std::string SignInGuard::addressOf(std::string_view peer) {
  if (!peer.empty() && peer.front() == '[') {
    size_t close = peer.find(']');
    if (close != std::string_view::npos) return std::string(peer.substr(1, close - 1));
  }
  size_t colon = peer.rfind(':');
  // One colon: host:port. More: an IPv6 address without a port.
  if (colon != std::string_view::npos && peer.find(':') == colon)
    return std::string(peer.substr(0, colon));
  return std::string(peer);
}

bool SignInGuard::enter(const std::string& peer, const AuthPolicy& policy) {
  std::string a = addressOf(peer);
  auto it = inFlight_.find(a);
  if (it == inFlight_.end()) {
    if (inFlight_.size() >= kMaxAddresses) return false;
    it = inFlight_.emplace(std::move(a), 0).first;
  }
  if (it->second >= policy.maxSignInsPerAddress) return false;
  ++it->second;
  return true;
}

void SignInGuard::leave(const std::string& peer) {
  auto it = inFlight_.find(addressOf(peer));
  if (it == inFlight_.end()) return;
  if (--it->second == 0) inFlight_.erase(it);
}

size_t SignInGuard::inFlight(const std::string& peer) const {
  auto it = inFlight_.find(addressOf(peer));
  return it == inFlight_.end() ? 0 : it->second;
}

std::optional<int64_t> SignInGuard::lockedFor(const std::string& name, TimePoint now) const {
  auto it = names_.find(name);
  if (it == names_.end() || it->second.lockedUntil <= now) return std::nullopt;
  auto left = std::chrono::ceil<std::chrono::seconds>(it->second.lockedUntil - now).count();
  return std::max<int64_t>(1, left);
}

bool SignInGuard::fail(const std::string& name, TimePoint now, const AuthPolicy& policy) {
  auto it = names_.find(name);
  if (it == names_.end()) {
    if (names_.size() >= kMaxNames) {
      // The longest untouched gives way: a flood of names forgets the
      // oldest, never grows without bound.
      auto oldest = std::min_element(names_.begin(), names_.end(), [](auto& a, auto& b) {
        return a.second.touched < b.second.touched;
      });
      names_.erase(oldest);
    }
    it = names_.emplace(name, Failures{}).first;
  }
  Failures& f = it->second;
  f.touched = now;
  if (++f.count >= policy.maxFailedSignIns) {
    f.count = 0;
    f.lockedUntil = now + policy.lockout;
    return true;
  }
  return false;
}

}  // namespace ductus::api
