// Passwords are kept as argon2id hashes (libargon2's encoded form, which
// carries its own salt and cost). Hashing costs tens of milliseconds and
// 19 MB on purpose, so on the engine it runs off the loop, on libuv's
// thread pool, at most `concurrent` at once; more wait, and past `queued`
// waiting a request is refused (an Error of kind Busy: answer 503) instead of
// piling up behind a password-guessing client.
#pragma once

#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ductus::api {

// OWASP's argon2id minimum: 19 MiB, 2 passes, 1 lane.
struct HashCost {
  uint32_t passes = 2;
  uint32_t memoryKiB = 19 * 1024;
  uint32_t lanes = 1;
};

// Blocking: for the CLI and for the pool's threads.
Result<std::string> hashPasswordNow(std::string_view password, const HashCost& cost = {});
// false for a wrong password; an Error for a hash that is not argon2id's.
Result<bool> verifyPasswordNow(const std::string& encoded, std::string_view password);

struct HashLimits {
  size_t concurrent = 2;  // hashes running at once, each on a thread of libuv's pool
  size_t queued = 32;     // waiting for one of those; past it: "busy"
};

class PasswordHasher {
 public:
  using Limits = HashLimits;

  PasswordHasher(uv_loop_t* loop, Limits limits = {}, HashCost cost = {});
  // Waiting requests are dropped unanswered; running ones finish on their
  // threads and are not answered.
  ~PasswordHasher();
  PasswordHasher(const PasswordHasher&) = delete;
  PasswordHasher& operator=(const PasswordHasher&) = delete;

  void hash(std::string password, std::function<void(Result<std::string>)> done);
  void verify(std::string encoded, std::string password, std::function<void(Result<bool>)> done);

  size_t running() const;
  size_t waiting() const;

  // Internal; public so the thread pool's plain callbacks can name them.
  struct State;
  struct Job;

 private:
  void submit(std::unique_ptr<Job> job);
  std::shared_ptr<State> state_;
};

}  // namespace ductus::api
