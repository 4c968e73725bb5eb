// Errors as values. Anything that reads user input or the database returns a Result<T>: either the
// value or an Error whose message already says where (file, line, key) and what was expected.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace servesim {

struct Error {
  std::string message;
  // The database or another output could not be written (a full disk, a file-size limit): a fault
  // of where the results go, not of the input, so a sweep reruns the point on --resume.
  bool storage = false;
};

// `e`, marked as a storage error.
inline Error storage_error(Error e) {
  e.storage = true;
  return e;
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok()
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }

  // REQUIRES: !ok()
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success carries nothing.
struct Ok {};
using Status = Result<Ok>;

}  // namespace servesim
