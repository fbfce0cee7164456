// Result<T>: a value or an Error, returned at every boundary instead of
// throwing. C++20 has no std::expected; this is the small subset we use.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace ductus {

// An error names the thing and the cause, e.g.
// "socketpair() failed while spawning worker: Too many open files".
struct Error {
  std::string message;
  // A machine-readable cause where one exists: a SQLSTATE ("40001") for
  // Postgres errors, empty otherwise.
  std::string code = {};

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
