// A workload read one request at a time, so that a run of millions of requests holds only those in
// flight (Simulator's streaming constructor). The requests are independent (no `after`) and come in
// non-decreasing arrival order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/request.h"

namespace servesim {

class RequestStream {
 public:
  virtual ~RequestStream() = default;
  // Overwrites `spec` with the next request; false when there is none left, or when the next could
  // not be made (then error() says why).
  virtual bool next(RequestSpec& spec) = 0;
  // Empty unless next() failed.
  virtual const std::string& error() const = 0;
  // How many requests it gives in all, or -1 when it cannot tell before reading them.
  virtual int64_t size() const { return -1; }
  // When its last request arrives, or -1 when it cannot tell before reading them.
  virtual Time last_arrival() const { return -1; }
  // Whether its specs stay in place for its whole life (a workload in memory): next_in_place()
  // then gives each where it is, and nothing is copied. REQUIRES of the caller: one of next() and
  // next_in_place() only.
  virtual bool gives_in_place() const { return false; }
  // The next request, in place; nullptr when none is left. REQUIRES: gives_in_place().
  virtual const RequestSpec* next_in_place() { return nullptr; }
};

// A workload already in memory, streamed: the simulator then keeps only the requests in flight
// (their specs stay where they are). REQUIRES: every spec is independent, in
// non-decreasing arrival order (Workload's order, when no request has `after`); `specs` outlives it.
class RequestListStream final : public RequestStream {
 public:
  explicit RequestListStream(const std::vector<RequestSpec>& specs) : specs_(specs) {}
  bool next(RequestSpec& spec) override {
    if (next_ == specs_.size()) return false;
    spec = specs_[next_++];
    return true;
  }
  const std::string& error() const override { return error_; }
  int64_t size() const override { return static_cast<int64_t>(specs_.size()); }
  Time last_arrival() const override { return specs_.empty() ? -1 : specs_.back().arrival; }
  bool gives_in_place() const override { return true; }
  const RequestSpec* next_in_place() override { return next_ == specs_.size() ? nullptr : &specs_[next_++]; }

 private:
  const std::vector<RequestSpec>& specs_;
  size_t next_ = 0;
  std::string error_;
};

}  // namespace servesim
