// What sign-in keeps in memory, both bounded:
//
// * Sign-ins in flight per address. Each costs an argon2id hash, and the
//   hasher's queue is shared (2 running, 32 waiting): one address past its
//   share (AuthPolicy::maxSignInsPerAddress) is answered 429 with
//   Retry-After, so it can't fill the queue and starve everyone else.
// * Failed sign-ins of names that are no user's (or a disabled one's),
//   counted and locked as a user's row is, so the sixth try of any name is
//   429 `locked` alike and the lockout does not tell which names exist.
//   At most kMaxNames are kept; past that the longest untouched goes.
//
// On the loop thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "api/audit/audit_log.h"
#include "api/auth/credentials.h"

namespace ductus::api {

class SignInGuard {
 public:
  static constexpr size_t kMaxNames = 10000;
  static constexpr size_t kMaxAddresses = 4096;

  // The address part of a peer ("127.0.0.1:5341" -> "127.0.0.1",
  // "[::1]:5341" -> "::1").
  static std::string addressOf(std::string_view peer);

  // A slot for one sign-in from `peer`'s address, or false when the
  // address has its policy's share in flight (or too many addresses do).
  bool enter(const std::string& peer, const AuthPolicy& policy);
  void leave(const std::string& peer);
  size_t inFlight(const std::string& peer) const;

  // Seconds `name` stays locked (at least 1), or nullopt when it is not.
  std::optional<int64_t> lockedFor(const std::string& name, TimePoint now) const;
  // Counts a failure of `name`; at the policy's limit it is locked for
  // policy.lockout and the count starts again. True when it locked now.
  bool fail(const std::string& name, TimePoint now, const AuthPolicy& policy);
  size_t namesKept() const { return names_.size(); }

 private:
  struct Failures {
    int count = 0;
    TimePoint lockedUntil{};
    TimePoint touched{};
  };
  std::unordered_map<std::string, size_t> inFlight_;
  std::unordered_map<std::string, Failures> names_;
};

// Holds a sign-in's slot until it is destroyed.
class SignInSlot {
 public:
  SignInSlot(SignInGuard& guard, std::string peer) : guard_(&guard), peer_(std::move(peer)) {}
  ~SignInSlot() {
    if (guard_) guard_->leave(peer_);
  }
  SignInSlot(SignInSlot&& o) noexcept : guard_(std::exchange(o.guard_, nullptr)), peer_(std::move(o.peer_)) {}
  SignInSlot(const SignInSlot&) = delete;
  SignInSlot& operator=(const SignInSlot&) = delete;
  SignInSlot& operator=(SignInSlot&&) = delete;

 private:
  SignInGuard* guard_;
  std::string peer_;
};

}  // namespace ductus::api
