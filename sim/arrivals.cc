// The simulator's requests as they arrive (sim/simulator.h): made from their specs, independent
// ones taken in arrival order from the workload in memory or from a stream, which is read ahead as
// far as the replicas' horizons need.
#include <algorithm>
#include <cassert>
#include <numeric>
#include <string>
#include <utility>

#include "sim/simulator.h"

namespace servesim {

void Simulator::init_request(Request& r, const RequestSpec& spec, int32_t index, int32_t slot) const {
  r.spec = &spec;
  r.index = index;
  r.slot = slot;
  r.arrival = spec.arrival;
  r.prompt_tokens = spec.prompt_tokens;
  r.priority = spec.priority;
  const int64_t room = max_model_len_ - spec.prompt_tokens;  // context left for output
  int64_t max_tokens = spec.max_tokens > 0          ? spec.max_tokens
                       : default_max_tokens_ > 0    ? default_max_tokens_
                       : max_model_len_ > 0         ? room
                                                    : 2048;
  if (max_model_len_ > 0) max_tokens = std::min(max_tokens, room);
  r.max_tokens = static_cast<int32_t>(std::max<int64_t>(max_tokens, 1));
  r.output_tokens = std::min(spec.output_tokens, r.max_tokens);  // the engine stops at max_tokens
  r.capped = spec.output_tokens > r.max_tokens;
  if (spec.prompt.empty()) {
    r.own_prompt = {content_id(kUniqueContent, static_cast<uint64_t>(index)), spec.prompt_tokens};
    r.prompt_segments = &r.own_prompt;
    r.num_prompt_segments = 1;
  } else {
    r.prompt_segments = spec.prompt.data();
    r.num_prompt_segments = static_cast<int32_t>(spec.prompt.size());
    assert(std::accumulate(spec.prompt.begin(), spec.prompt.end(), int64_t{0},
                           [](int64_t a, const Segment& s) { return a + s.tokens; }) ==
           spec.prompt_tokens);
  }
  r.output_id = spec.output_id != 0 ? spec.output_id : content_id(kOutputContent, static_cast<uint64_t>(index));
}

bool Simulator::look_ahead(size_t count) {
  while (upcoming_.size() < count && !stream_done_) {
    const RequestSpec* spec = nullptr;
    if (in_place_) {
      spec = stream_->next_in_place();
    } else if (stream_->next(read_.emplace_back())) {
      spec = &read_.back();
    } else {
      read_.pop_back();
    }
    if (spec == nullptr) {
      stream_done_ = true;
      if (!stream_->error().empty() && failure_.empty()) failure_ = stream_->error();
      break;
    }
    const Time last = upcoming_.empty() ? last_streamed_ : upcoming_.back()->arrival;
    if (!spec->after.empty() || spec->arrival < last || spec->arrival < 0 || spec->arrival > kTimeHorizon) {
      stream_done_ = true;
      if (failure_.empty()) {
        failure_ = "request '" + spec->id + "' of the stream " +
                   (!spec->after.empty() ? std::string("follows other requests, which a stream cannot hold")
                                         : "arrives out of order or outside the horizon") +
                   " (a bug: please report it with the workload)";
      }
      if (!in_place_) read_.pop_back();
      break;
    }
    upcoming_.push_back(spec);
  }
  return upcoming_.size() >= count;
}

bool Simulator::has_next_arrival() const {
  return stream_ != nullptr ? !upcoming_.empty() : next_arrival_ < independent_.size();
}

Time Simulator::next_arrival_time() const {
  return stream_ != nullptr ? upcoming_.front()->arrival
                            : requests_[static_cast<size_t>(independent_[next_arrival_])].arrival;
}

Time Simulator::arrival_after(size_t m) {
  if (stream_ != nullptr) return look_ahead(m + 1) ? upcoming_[m]->arrival : kNever;
  return next_arrival_ + m < independent_.size()
             ? requests_[static_cast<size_t>(independent_[next_arrival_ + m])].arrival
             : kNever;
}

Request& Simulator::take_arrival() {
  if (stream_ == nullptr) return requests_[static_cast<size_t>(independent_[next_arrival_++])];
  // A free slot, or a new one: the streamed request lives there until it is settled.
  size_t slot;
  if (!free_slots_.empty()) {
    slot = static_cast<size_t>(free_slots_.back());
    free_slots_.pop_back();
    requests_[slot] = Request{};
  } else {
    slot = requests_.size();
    requests_.emplace_back();
    if (!in_place_) specs_.emplace_back();
  }
  const RequestSpec* spec = upcoming_.front();
  upcoming_.pop_front();
  if (!in_place_) {
    specs_[slot] = std::move(read_.front());
    read_.pop_front();
    spec = &specs_[slot];
  }
  last_streamed_ = spec->arrival;
  Request& r = requests_[slot];
  // The request's number in the run: a group of a split run receives, of every total_replicas_
  // requests in a row, those of its replicas.
  const int64_t k = streamed_++;
  const auto count = static_cast<int64_t>(replicas_.size());
  const int64_t index = total_replicas_ == 0 ? k : k / count * total_replicas_ + first_replica_ + k % count;
  init_request(r, *spec, static_cast<int32_t>(index), static_cast<int32_t>(slot));
  look_ahead(1);
  return r;
}

}  // namespace servesim
