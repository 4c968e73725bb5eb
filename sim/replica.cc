#include "sim/replica.h"

#include "sim/format_number.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <utility>

namespace servesim {

Replica::Replica(int32_t id, SchedulerLimits limits, int64_t max_model_len, BlockManager kv,
                 std::unique_ptr<Policy> policy,
                 std::unique_ptr<Backend> backend, std::span<Recorder* const> recorders,
                 const bool* more_arrivals, std::vector<int32_t>* settled)
    : id_(id),
      limits_(limits),
      max_model_len_(max_model_len),
      kv_(std::move(kv)),
      policy_(std::move(policy)),
      queue_order_(policy_->queue_order()),
      backend_(std::move(backend)),
      recorders_(recorders),
      more_arrivals_(more_arrivals),
      settled_(settled),
      depth_(std::max(backend_->pipeline_stages(), 1)) {
  batch_.items.reserve(static_cast<size_t>(limits.max_num_seqs));
  if (depth_ > 1) {
    stage_free_.assign(static_cast<size_t>(depth_), 0);
    stage_time_.assign(static_cast<size_t>(depth_), 0);
    send_time_.assign(static_cast<size_t>(depth_ - 1), 0);
  }
}

void Replica::enqueue(Request* r, Time now) {
  now_ = now;
  r->replica = static_cast<int16_t>(id_);
  r->status = RequestStatus::kWaiting;
  if (queue_order_ == QueueOrder::kPriority) {
    insert_by_priority(r);
  } else {
    waiting_.push_back(r);
  }
  if (max_model_len_ > 0 && r->prompt_tokens >= max_model_len_) {
    reject(r, RejectCause::kContextLength, "prompt of " + std::to_string(r->prompt_tokens) +
                  " tokens leaves no room in the model's context of " +
                  std::to_string(max_model_len_) + " tokens");
  } else if (!kv_.fits_at_all(r->prompt_tokens)) {
    reject(r, RejectCause::kKvCapacity, "prompt of " + std::to_string(r->prompt_tokens) + " tokens needs " +
                  std::to_string(kv_.blocks_for(r->prompt_tokens)) + " KV blocks; the cache has " +
                  std::to_string(kv_.num_total()));
  }
  if (r->status == RequestStatus::kWaiting && leap_count_ > 0) {
    leap_arrivals_.push_back(now);  // the leap in flight goes past it
  }
}

void Replica::refuse(Request* r, Time now, RejectCause cause, std::string reason) {
  now_ = now;
  r->replica = static_cast<int16_t>(id_);
  r->status = RequestStatus::kWaiting;
  waiting_.push_back(r);
  reject(r, cause, std::move(reason));
}

Time Replica::start_iteration(Time now) {
  assert(!busy_);
  now_ = now;
  batch_.clear();
  preempted_ = 0;
  group_offered_ = false;
  policy_->next_batch(*this, now, batch_);
  if (!incoming_.empty() && preempted_ == 0) reserve_incoming();  // as vLLM: none after a preemption
  wake_at_ = batch_.wake_at;
  if (batch_.empty()) {
    busy_ = !in_flight_.empty();  // a pipeline waits for its oldest batch (vLLM blocks on it)
    return kNever;
  }

  record_ = IterationRecord{};
  record_.replica = id_;
  record_.step = step_;
  record_.waiting = static_cast<int32_t>(waiting_.size());
  record_.preempted = preempted_;
  record_.start = now;
  record_.decode_tokens = batch_.group;
  for (const BatchItem& item : batch_.items) {
    const Sequence& s = *item.seq;
    const bool decode = item.padding || (s.num_output > 0 && s.num_uncomputed() == 1);
    (decode ? record_.decode_tokens : record_.prefill_tokens) += item.new_tokens;
  }
  record_.num_seqs = static_cast<int32_t>(batch_.size());
  record_.kv_blocks_used = kv_.num_used();
  record_.kv_blocks_total = kv_.num_total();
  if (depth_ > 1) return start_in_pipeline(now);

  // A batch of the decode group alone is priced as the first iteration of its run
  // (Backend::decode_run gives exactly run()'s duration, and the prediction is the duration): a leap
  // from it goes on from that run rather than price it again.
  leap_run_known_ = grouping_ && batch_.items.empty() && backend_->decode_run(batch_, leap_run_);
  const IterationResult result =
      leap_run_known_ ? IterationResult{leap_run_.at(0), leap_run_.at(0)} : backend_->run(batch_);
  assert(result.duration > 0);
  const Time end = add_time(now, result.duration);
  if (end == kNever) {
    failure_ = "iteration " + std::to_string(step_) + " of replica " + std::to_string(id_) +
               ", starting at " + format_number(to_seconds(now)) + " s, would end past the " +
               "simulation horizon of 1e9 s (" +
               (result.duration == kNever ? std::string("the cost model priced it beyond that")
                                          : "it lasts " + format_number(to_seconds(result.duration)) + " s") +
               "); check the hardware's bandwidth, FLOP/s and overhead_us";
    return kNever;
  }
  record_.duration = result.duration;
  record_.predicted = result.predicted;
  busy_ = true;
  first_end_ = end;
  leap_count_ = 0;
  leapable_ = grouping_ && batch_leapable();
  return end;
}

void Replica::stretch_iteration(Time end) {
  assert(busy_ && end >= first_end_ && depth_ <= 1);
  record_.duration = end - record_.start;
  first_end_ = end;
  leapable_ = false;
}

void Replica::finish_iteration(Time now) {
  if (depth_ > 1) {
    finish_pipelined(now);
    return;
  }
  assert(busy_);
  if (leap_count_ > 0) {
    finish_leap(now);
    return;
  }
  now_ = now;
  leaving_.clear();
  if (batch_.group > 0) {
    record_.grouped = batch_.group;
    record_.group_gap = now - group_end_;
    record_.emitted += batch_.group;
    step_group(now, 1);
  }
  for (BatchItem& item : batch_.items) {
    if (item.padding) continue;
    Request& r = req(item.seq);
    r.num_computed += item.new_tokens;
    assert(r.num_computed <= r.num_tokens());
    if (r.num_computed < r.num_tokens()) continue;  // a prompt chunk that did not finish the prompt
    // Every token is computed: the forward pass produced the next output token.
    ++record_.emitted;
    emit_token(item, r, now);
  }
  if (!leaving_.empty()) drop_leaving();
  // What is left of the group stays one. So does a group the policy took and then dropped (its
  // members paused for a prefill-only iteration): they did not run. Otherwise, when the members
  // ran one by one, the next iteration looks again.
  if (batch_.group == 0 && !group_offered_ && group_size_ > 0) dissolve_group();
  assert(batch_.group > 0 || !group_offered_ ||
         std::none_of(running_.begin(), running_.begin() + static_cast<std::ptrdiff_t>(group_size_),
                      [&](const Sequence* s) { return req(s).last_token == now; }));
  for (Recorder* rec : recorders_) rec->on_iteration(record_, batch_.items);
  ++step_;
  busy_ = false;
}

void Replica::emit_token(BatchItem& item, Request& r, Time now) {
  item.emitted = true;
  ++r.num_output;
  if (!r.held) {
    if (r.first_token < 0) {
      r.first_token = client_time(r, now);
    } else {
      item.token_gap = now - r.last_token;
    }
  }
  r.last_token = now;
  if (r.generation_done()) {
    leaving_.push_back(&r);
    finish_generation(r);
  } else if (role_ == ReplicaRole::kPrefill) {
    // Its first token is out: the rest is decoded elsewhere, from this KV (see set_role).
    leaving_.push_back(&r);
    r.status = RequestStatus::kTransferring;
    handoffs_->push_back(r.slot);
  }
}

void Replica::drop_leaving() {
  // Each leaving request is found from the one before, and the kept requests between two of them
  // move down as one block: mostly one or two leave a batch of up to max_num_seqs, so a compare and
  // a copy per kept request would cost more than finding them.
  const auto end = running_.end();
  auto kept = std::find(running_.begin(), end, leaving_.front());  // where the kept ones go next
  auto at = kept;                                                  // the leaving one found last
  size_t found = 0;
  while (at != end) {
    ++found;
    const auto next = found < leaving_.size() ? std::find(at + 1, end, leaving_[found]) : end;
    kept = std::move(at + 1, next, kept);
    at = next;
  }
  running_.erase(kept, end);
  if (found < leaving_.size()) {  // a policy listed its items out of running order: some are left
    std::erase_if(running_, [](const Sequence* s) {
      return s->status == RequestStatus::kDone || s->status == RequestStatus::kTransferring;
    });
  }
}

void Replica::set_role(ReplicaRole role, std::vector<int32_t>* handoffs, std::vector<Reservation>* reserved) {
  role_ = role;
  handoffs_ = handoffs;
  reserved_ = reserved;
}

void Replica::expect(Request* r) {
  assert(role_ == ReplicaRole::kDecode && r->status == RequestStatus::kTransferring && r->block_table.empty());
  r->decode_replica = static_cast<int16_t>(id_);
  incoming_.push_back(r);
}

void Replica::reserve_incoming() {
  // As vLLM's scheduler with a KV connector (NixlConnector): a request whose KV is remote takes
  // blocks for it from the waiting queue, after the running requests took theirs, first come first
  // served; the blocks its prefix cache already holds are not fetched.
  const auto max_seqs = static_cast<size_t>(limits_.max_num_seqs);
  while (!incoming_.empty() && running_.size() + receiving_ < max_seqs) {
    Request& r = *incoming_.front();
    const int32_t hits = kv_.cached_prefix_tokens(r);
    // (A hybrid layout's admission check caps windowed groups where the allocation does not.)
    if (!kv_.can_allocate(r, r.prompt_tokens, hits) || !kv_.allocate(r, r.prompt_tokens, hits)) break;
    incoming_.pop_front();
    ++receiving_;
    reserved_->push_back({r.slot, hits});
  }
}

void Replica::receive(Request* r, Time now) {
  assert(receiving_ > 0 && r->status == RequestStatus::kTransferring);
  --receiving_;
  now_ = now;
  r->status = RequestStatus::kRunning;  // its prompt computed, its first token to be computed next
  running_.push_back(r);
}

void Replica::finish_generation(Request& r) {
  r.status = RequestStatus::kDone;
  kv_.free(r);
  std::vector<int32_t>().swap(r.block_table);  // a finished request keeps no memory
  std::vector<uint64_t>().swap(r.block_hashes);
  if (!r.held) complete(r);
}

Time Replica::client_time(const Request& r, Time now) const {
  return add_time(now, backend_->request_overhead(r.prompt_tokens));
}

void Replica::complete(Request& r) {
  r.finished = client_time(r, now_);
  for (Recorder* rec : recorders_) rec->on_request(r);
  settled_->push_back(r.slot);
}

void Replica::admit(Sequence* seq, int32_t num_cached_tokens) {
  if (!waiting_.empty() && waiting_.front() == seq) {
    waiting_.pop_front();
    // The request after the new head: in a long queue it arrived long ago and is cold, and the
    // policy looks at it when it admits the head, mostly at a later iteration. (The new head was
    // fetched so when it was second.)
    if (waiting_.size() > 1) {
      const char* next = reinterpret_cast<const char*>(waiting_[1]);
      for (size_t line = 0; line < sizeof(Request); line += 64) __builtin_prefetch(next + line);
    }
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    assert(it != waiting_.end());
    waiting_.erase(it);
  }
  seq->status = RequestStatus::kRunning;
  seq->num_computed = num_cached_tokens;
  running_.push_back(seq);
  Request& r = req(seq);
  if (r.scheduled < 0) {
    r.scheduled = now_;
    r.cached_tokens = num_cached_tokens;
  }
}

void Replica::preempt(Sequence* seq) {
  auto it = std::find(running_.rbegin(), running_.rend(), seq);
  assert(it != running_.rend());
  const auto at = static_cast<size_t>(std::next(it).base() - running_.begin());
  if (at < group_size_) {
    leave_group(seq);
    if (at < static_cast<size_t>(batch_.group)) {  // scheduled with the group: it leaves the batch
      --batch_.group;
      batch_.group_context -= seq->num_computed;
    }
  }
  running_.erase(std::next(it).base());
  kv_.free(*seq);
  seq->num_computed = 0;  // recompute: the prompt and the output so far are prefilled again
  ++seq->preemptions;
  ++preempted_;
  seq->status = RequestStatus::kWaiting;
  if (queue_order_ == QueueOrder::kPriority) {
    insert_by_priority(seq);
  } else {
    waiting_.push_front(seq);
  }
}

void Replica::insert_by_priority(Sequence* seq) {
  // vLLM's Request.__lt__: priority, then arrival time, then request id. Arrivals of one priority
  // come in time order, so the common insertion is at the back.
  const auto before = [](const Sequence* a, const Sequence* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    if (a->arrival != b->arrival) return a->arrival < b->arrival;
    return req(a).id() < req(b).id();
  };
  if (waiting_.empty() || !before(seq, waiting_.back())) {
    waiting_.push_back(seq);
    return;
  }
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, before), seq);
}

void Replica::reject(Sequence* seq, RejectCause cause, std::string reason) {
  auto it = std::find(waiting_.begin(), waiting_.end(), seq);
  assert(it != waiting_.end());
  waiting_.erase(it);
  kv_.free(*seq);
  Request& r = req(seq);
  r.status = RequestStatus::kRejected;
  r.reason = std::move(reason);
  r.cause = cause;
  for (Recorder* rec : recorders_) rec->on_request(r);
  settled_->push_back(r.slot);
}

void Replica::hold_response(Sequence* seq) { req(seq).held = true; }

void Replica::release(Sequence* seq) {
  Request& r = req(seq);
  assert(r.held && r.status == RequestStatus::kDone);
  r.first_token = client_time(r, now_);  // nothing was streamed: the whole response arrives now
  complete(r);
}

}  // namespace servesim
