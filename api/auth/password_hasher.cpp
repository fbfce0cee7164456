#include "api/auth/password_hasher.h"

#include <argon2.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <optional>
#include <vector>

namespace ductus::api {

Result<std::string> hashPasswordNow(std::string_view password, const HashCost& cost) {
  unsigned char salt[16];
  if (RAND_bytes(salt, sizeof salt) != 1)
    return Error{"the system's random number generator failed"};
  size_t len = argon2_encodedlen(cost.passes, cost.memoryKiB, cost.lanes, sizeof salt, 32,
                                 Argon2_id);
  std::string encoded(len, '\0');
  int rc = argon2id_hash_encoded(cost.passes, cost.memoryKiB, cost.lanes, password.data(),
                                 password.size(), salt, sizeof salt, 32, encoded.data(), len);
  if (rc != ARGON2_OK) return Error{std::string("argon2id failed: ") + argon2_error_message(rc)};
  encoded.resize(encoded.find('\0') == std::string::npos ? len : encoded.find('\0'));
  return encoded;
}

Result<bool> verifyPasswordNow(const std::string& encoded, std::string_view password) {
  if (!encoded.starts_with("$argon2id$")) return Error{"the stored hash is not argon2id's"};
  int rc = argon2id_verify(encoded.c_str(), password.data(), password.size());
  if (rc == ARGON2_OK) return true;
  if (rc == ARGON2_VERIFY_MISMATCH) return false;
  return Error{std::string("argon2id failed: ") + argon2_error_message(rc)};
}

struct PasswordHasher::Job {
  uv_work_t req{};
  std::shared_ptr<State> state;
  bool verify = false;
  std::string password, encoded;
  std::function<void(Result<std::string>)> hashDone;
  std::function<void(Result<bool>)> verifyDone;
  // Set on the thread, read in the after-work callback on the loop.
  std::optional<Result<std::string>> hashed;
  std::optional<Result<bool>> verified;

  ~Job() { OPENSSL_cleanse(password.data(), password.size()); }
};

struct PasswordHasher::State {
  uv_loop_t* loop;
  Limits limits;
  HashCost cost;
  bool alive = true;
  size_t running = 0;
  std::deque<std::unique_ptr<Job>> waiting;
};

namespace {

void work(uv_work_t* req);
void afterWork(uv_work_t* req, int status);

}  // namespace

PasswordHasher::PasswordHasher(uv_loop_t* loop, Limits limits, HashCost cost)
    : state_(std::make_shared<State>(State{loop, limits, cost, true, 0, {}})) {
  if (state_->limits.concurrent == 0) state_->limits.concurrent = 1;
}

PasswordHasher::~PasswordHasher() {
  state_->alive = false;
  state_->waiting.clear();
}

size_t PasswordHasher::running() const { return state_->running; }
size_t PasswordHasher::waiting() const { return state_->waiting.size(); }

void PasswordHasher::hash(std::string password, std::function<void(Result<std::string>)> done) {
  auto job = std::make_unique<Job>();
  job->password = std::move(password);
  job->hashDone = std::move(done);
  submit(std::move(job));
}

void PasswordHasher::verify(std::string encoded, std::string password,
                            std::function<void(Result<bool>)> done) {
  auto job = std::make_unique<Job>();
  job->verify = true;
  job->encoded = std::move(encoded);
  job->password = std::move(password);
  job->verifyDone = std::move(done);
  submit(std::move(job));
}

namespace {

// Starts waiting jobs while fewer than `concurrent` run.
template <typename State, typename Job>
void pump(const std::shared_ptr<State>& s) {
  while (s->alive && s->running < s->limits.concurrent && !s->waiting.empty()) {
    std::unique_ptr<Job> job = std::move(s->waiting.front());
    s->waiting.pop_front();
    job->state = s;
    job->req.data = job.get();
    if (uv_queue_work(s->loop, &job->req, work, afterWork) != 0) {
      Error e{"the password hashing pool could not start a job", ErrorKind::Busy};
      if (job->verify) job->verifyDone(e);
      else job->hashDone(e);
      continue;
    }
    ++s->running;
    job.release();  // owned by the request until afterWork
  }
}

void work(uv_work_t* req) {
  auto* job = static_cast<PasswordHasher::Job*>(req->data);
  if (job->verify) job->verified = verifyPasswordNow(job->encoded, job->password);
  else job->hashed = hashPasswordNow(job->password, job->state->cost);
}

void afterWork(uv_work_t* req, int status) {
  std::unique_ptr<PasswordHasher::Job> job(static_cast<PasswordHasher::Job*>(req->data));
  auto s = job->state;
  --s->running;
  if (s->alive) {
    if (status != 0) {
      Error e{"password hashing was cancelled"};
      if (job->verify) job->verifyDone(e);
      else job->hashDone(e);
    } else if (job->verify) {
      job->verifyDone(std::move(*job->verified));
    } else {
      job->hashDone(std::move(*job->hashed));
    }
  }
  pump<PasswordHasher::State, PasswordHasher::Job>(s);
}

}  // namespace

void PasswordHasher::submit(std::unique_ptr<Job> job) {
  auto& s = state_;
  if (s->waiting.size() >= s->limits.queued && s->running >= s->limits.concurrent) {
    Error e{"too many sign-ins at once; try again shortly", ErrorKind::Busy};
    if (job->verify) job->verifyDone(e);
    else job->hashDone(e);
    return;
  }
  s->waiting.push_back(std::move(job));
  pump<State, Job>(s);
}

}  // namespace ductus::api
