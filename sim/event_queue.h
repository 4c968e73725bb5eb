// The simulator's pending events, ordered by (time, insertion order): events at the same time come
// out in the order they were pushed, so runs are deterministic. A binary heap: push and pop are
// O(log n) in the number of pending events (at most a few per replica).
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "sim/time.h"

namespace servesim {

enum class EventKind : uint8_t {
  kIterationEnd,  // a replica's forward pass completes
  kWake,          // a policy asked to be consulted again (static batching's max_wait)
  kArrival,       // a dependent request arrives (its parents finished, plus think time)
  kSend,          // a request held by max_concurrency is sent: a slot came free
  kTransferEnd,   // a request's KV has moved from its prefill replica to its decode replica
  kRelease,       // a client has a response: its max_concurrency slot comes free
};

struct Event {
  Time time = 0;
  uint64_t seq = 0;  // insertion number
  EventKind kind = EventKind::kIterationEnd;
  int32_t target = 0;  // the replica, or for kArrival, kSend and kTransferEnd the request's slot
};

class EventQueue {
 public:
  void push(Time time, EventKind kind, int32_t target) {
    heap_.push(Event{time, next_seq_++, kind, target});
  }
  bool empty() const { return heap_.empty(); }
  // REQUIRES: !empty()
  const Event& top() const { return heap_.top(); }
  // REQUIRES: !empty()
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace servesim
