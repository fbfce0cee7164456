// Result<T>: a value or an Error, returned at every boundary instead of
// throwing. C++20 has no std::expected; this is the small subset we use.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace ductus {

// What kind of failure an Error is: what a caller decides on (the HTTP
// status, the exit code, whether to retry). The text is for people; the
// kind is for code, so no caller ever compares error text or a code string.
enum class ErrorKind : unsigned char {
  Internal,         // the engine's own fault or the OS's: a bug to report
  Invalid,          // the caller's input is wrong (400)
  NotFound,         // no such thing (404)
  Exists,           // the name is taken (409)
  Conflict,         // not in a state the action applies to (409)
  Busy,             // a bounded queue is full: try again shortly (503)
  Unavailable,      // the database or a peer can't serve now (503)
  Unauthenticated,  // no valid credentials (401)
  Denied,           // credentials refused: locked, disabled (401)
  WeakPassword,     // a password breaks a rule (400)
  Code,             // an interface's script doesn't load (422)
  Config,           // the project's configuration is invalid
  NotRunning,       // the engine isn't running (ductusctl)
  Database,         // PostgreSQL refused: Error::sqlstate says why (schema/pg_error.h)
  // Conflicts a client tells apart (each its own name in a 409 answer):
  NothingToChange,  // the message has no delivery the action applies to
  StillPending,     // a delivery of the message is still waiting
  NotRunHere,       // another engine runs the interface's intake
  // Sign-in: the password must be changed first (403).
  PasswordChangeRequired,
  // Sign-in: the user's role needs a second factor they have not turned
  // on yet (403).
  TotpRequired,
  // Ownership at start: another engine owns an interface; or an interface
  // is stranded (owned by a dead engine and not released).
  OwnedElsewhere,
  Stranded,
};

// The name a JSON answer or a log line shows for a kind ("not_found").
constexpr const char* kindName(ErrorKind k) {
  switch (k) {
    case ErrorKind::Internal:
      return "internal";
    case ErrorKind::Invalid:
      return "invalid";
    case ErrorKind::NotFound:
      return "not_found";
    case ErrorKind::Exists:
      return "exists";
    case ErrorKind::Conflict:
      return "conflict";
    case ErrorKind::Busy:
      return "busy";
    case ErrorKind::Unavailable:
      return "unavailable";
    case ErrorKind::Unauthenticated:
      return "unauthenticated";
    case ErrorKind::Denied:
      return "denied";
    case ErrorKind::WeakPassword:
      return "weak_password";
    case ErrorKind::Code:
      return "code";
    case ErrorKind::Config:
      return "config";
    case ErrorKind::NotRunning:
      return "not_running";
    case ErrorKind::Database:
      return "database";
    case ErrorKind::NothingToChange:
      return "nothing_to_change";
    case ErrorKind::StillPending:
      return "still_pending";
    case ErrorKind::NotRunHere:
      return "not_run_here";
    case ErrorKind::PasswordChangeRequired:
      return "password_change_required";
    case ErrorKind::TotpRequired:
      return "totp_required";
    case ErrorKind::OwnedElsewhere:
      return "owned";
    case ErrorKind::Stranded:
      return "stranded";
  }
  return "internal";
}

// An error names the thing and the cause, e.g.
// "socketpair() failed while spawning worker: Too many open files".
struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::Internal;
  // PostgreSQL's SQLSTATE ("40001") when kind is Database; read it only
  // through schema/pg_error.h's named predicates.
  std::string sqlstate = {};

  static Error fromErrno(std::string_view what, int err = errno) {
    return Error{std::string(what) + ": " + std::strerror(err)};
  }
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace ductus
