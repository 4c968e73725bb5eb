// A workload read one request at a time, so that a run of millions of requests holds only those in
// flight (Simulator's streaming constructor). The requests are independent (no `after`) and come in
// non-decreasing arrival order.
#pragma once

#include <cstdint>
#include <string>

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
};

}  // namespace servesim
