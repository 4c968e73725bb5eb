#include "sim/replica.h"

#include "sim/toml_fields.h"

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
      settled_(settled) {
  batch_.items.reserve(static_cast<size_t>(limits.max_num_seqs));
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
  if (r->status == RequestStatus::kWaiting && !leap_durations_.empty()) {
    leap_arrivals_.push_back(now);  // the leap in flight goes past it
  }
}

Time Replica::start_iteration(Time now) {
  assert(!busy_);
  now_ = now;
  batch_.clear();
  preempted_ = 0;
  group_offered_ = false;
  policy_->next_batch(*this, now, batch_);
  wake_at_ = batch_.wake_at;
  if (batch_.empty()) return kNever;

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

  const IterationResult result = backend_->run(batch_);
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
  leap_durations_.clear();
  leap_kv_used_.clear();
  leapable_ = leaps_enabled_ && batch_leapable();
  return end;
}

void Replica::enable_grouping(bool on) {
  grouping_ = on && backend_->prices_decode_groups();
  leaps_enabled_ = grouping_;
}

bool Replica::decodes_in_step(const Sequence* seq) const {
  const Request& r = req(seq);
  return !r.held && r.num_output > 0 && r.num_uncomputed() == 1 && r.last_token == group_end_;
}

size_t Replica::bucket_of(const Sequence* seq) const {
  const int64_t bs = kv_.block_size();
  return static_cast<size_t>(((seq->num_computed - group_steps_) % bs + bs) % bs);
}

void Replica::join_group(Sequence* seq) {
  const Request& r = req(seq);
  buckets_[bucket_of(seq)].push_back({tickets_++, seq});
  group_context_ += r.num_computed;
  group_min_left_ = std::min(group_min_left_, r.output_tokens - r.num_output);
  ++group_size_;
}

void Replica::leave_group(const Sequence* seq) {
  std::vector<Member>& bucket = buckets_[bucket_of(seq)];
  const auto it = std::find_if(bucket.begin(), bucket.end(), [seq](const Member& m) { return m.seq == seq; });
  assert(it != bucket.end());
  bucket.erase(it);
  group_context_ -= seq->num_computed;
  --group_size_;  // group_min_left_ stays a lower bound
}

void Replica::forget_group() {
  for (auto& bucket : buckets_) bucket.clear();
  group_size_ = 0;
  group_context_ = 0;
  group_min_left_ = std::numeric_limits<int32_t>::max();
}

void Replica::touched_members(size_t opens) {
  const std::vector<Member>& opening = buckets_[opens];
  touched_.assign(opening.begin(), opening.end());
  const int32_t bs = kv_.block_size();
  if (kv_.prefix_caching() && bs > 1) {
    const std::vector<Member>& filling = buckets_[opens == 0 ? static_cast<size_t>(bs) - 1 : opens - 1];
    const size_t mid = touched_.size();
    touched_.insert(touched_.end(), filling.begin(), filling.end());
    std::inplace_merge(touched_.begin(), touched_.begin() + static_cast<std::ptrdiff_t>(mid), touched_.end(),
                       [](const Member& a, const Member& b) { return a.ticket < b.ticket; });
  }
}

int32_t Replica::schedule_decode_group(Batch& batch, int64_t max) {
  assert(batch.empty());
  if (!grouping_) return 0;
  // Who belongs: what is left of the group that ran last, and the requests behind it that decode
  // and emitted their last token with it (those that were just prefilled, when it ran too).
  if (group_size_ == 0) {
    if (running_.empty()) return 0;
    forget_group();
    buckets_.resize(static_cast<size_t>(kv_.block_size()));
    group_end_ = req(running_.front()).last_token;
  }
  while (group_size_ < running_.size() && decodes_in_step(running_[group_size_])) {
    join_group(running_[group_size_]);
  }
  if (group_size_ == 0 || static_cast<int64_t>(group_size_) > max) return 0;

  // As the policy would one by one: each member allocates room for its next token. That takes a
  // block when the token opens one; with prefix caching it also registers the block the token
  // fills. For every other member the allocation changes nothing.
  const int64_t bs = kv_.block_size();
  int64_t need = 0;
  for (const Member& m : buckets_[opens_at_]) {
    if (m.seq->num_computed + 1 > static_cast<int64_t>(m.seq->block_table.size()) * bs) ++need;
  }
  if (need > kv_.num_free()) return 0;  // some member would preempt: the policy goes one by one
  touched_members(opens_at_);
  for (const Member& m : touched_) {
    [[maybe_unused]] const bool ok = kv_.allocate(*m.seq, int64_t{m.seq->num_computed} + 1);
    assert(ok);
  }
  batch.group = static_cast<int32_t>(group_size_);
  batch.group_context = group_context_;
  group_offered_ = true;
  return batch.group;
}

int32_t Replica::step_group(Time now, int32_t k) {
  int32_t done = 0;
  int32_t min_left = std::numeric_limits<int32_t>::max();
  const auto n = static_cast<size_t>(batch_.group);
  for (size_t x = 0; x < n; ++x) {
    Request& r = req(running_[x]);
    assert(r.last_token == group_end_ && r.num_uncomputed() == 1);
    r.num_computed += k;
    r.num_output += k;
    assert(r.num_output <= r.output_tokens);
    r.last_token = now;
    min_left = std::min(min_left, r.output_tokens - r.num_output);
  }
  group_steps_ += k;
  group_context_ += int64_t{k} * batch_.group;
  const int32_t bs = kv_.block_size();
  opens_at_ = static_cast<size_t>(((static_cast<int64_t>(opens_at_) - k) % bs + bs) % bs);
  group_end_ = now;
  if (min_left == 0) {  // somebody finished
    min_left = std::numeric_limits<int32_t>::max();
    for (size_t x = 0; x < n; ++x) {
      Request& r = req(running_[x]);
      if (!r.generation_done()) {
        min_left = std::min(min_left, r.output_tokens - r.num_output);
        continue;
      }
      ++done;
      leave_group(&r);
      r.status = RequestStatus::kDone;
      kv_.free(r);
      std::vector<int32_t>().swap(r.block_table);  // a finished request keeps no memory
      std::vector<uint64_t>().swap(r.block_hashes);
      complete(r);
    }
  }
  group_min_left_ = min_left;
  return done;
}

bool Replica::batch_leapable() {
  // The decode group of every running request, formed without a preemption, none of it finishing
  // in this very iteration (which leaves no run to leap over).
  if (preempted_ > 0 || !batch_.items.empty() || static_cast<size_t>(batch_.group) != running_.size() ||
      group_min_left_ <= 1) {
    return false;
  }
  if (!policy_->decode_batch_repeats(*this)) return false;
  ignores_arrivals_ = policy_->decode_batch_ignores_arrivals(*this);
  return true;
}

Time Replica::leap(Time horizon) {
  assert(busy_ && leapable_);
  leapable_ = false;
  Time t = first_end_;  // the start of the next iteration
  if (t >= horizon || !backend_->begin_decode_run(batch_)) return t;
  // Iteration j (the first is 0) emits every member's token num_output + j + 1; none may finish
  // before the last iteration of the leap.
  const int64_t steps = group_min_left_;
  // The iterations' durations, priced ahead in chunks: no more than the leap may need (at most
  // `steps`, and as many as fit before the horizon if none were shorter than the last).
  size_t next = 0;
  priced_.clear();
  const auto duration = [&](int64_t j) {
    if (next == priced_.size()) {
      const Time last = priced_.empty() ? record_.duration : priced_.back();
      const int64_t fit = horizon == kNever ? steps : (horizon - t) / std::max<Time>(last, 1) + 1;
      priced_.resize(static_cast<size_t>(std::clamp<int64_t>(std::min(steps - j, fit), 1, 1024)));
      backend_->next_decode_steps(priced_);
      next = 0;
    }
    return priced_[next++];
  };
  if (duration(0) != record_.duration) {
    assert(false && "a backend's decode run disagrees with run()");
    return t;
  }
  const int32_t bs = kv_.block_size();
  // As the policy would at the start of iteration j, every member allocates room for its token
  // c + j + 1 (c: its context in iteration 0). That takes a block when token c + j starts one, for
  // the members whose bucket is j below opens_at_; with prefix caching it also registers the block
  // that token c + j + 1 fills, for those one bucket further. For every other member the
  // allocation changes nothing.
  size_t opens = opens_at_;
  for (int64_t j = 1; j < steps && t < horizon; ++j) {
    opens = opens == 0 ? static_cast<size_t>(bs) - 1 : opens - 1;
    const std::vector<Member>& opening = buckets_[opens];
    if (!opening.empty()) {
      int64_t need = 0;
      for (const Member& m : opening) {
        if (m.seq->num_computed + j + 1 > static_cast<int64_t>(m.seq->block_table.size()) * bs) ++need;
      }
      if (need > kv_.num_free()) break;  // the policy would preempt here: run it one by one
    }
    const Time d = duration(j);
    const Time end = add_time(t, d);
    if (end == kNever) break;  // run one by one, which reports the horizon
    if (opening.empty() && !kv_.prefix_caching()) {
      leap_durations_.push_back(d);
      leap_kv_used_.push_back(kv_.num_used());
      t = end;
      continue;
    }
    touched_members(opens);
    for (const Member& m : touched_) {
      [[maybe_unused]] const bool ok = kv_.allocate(*m.seq, m.seq->num_computed + j + 1);
      assert(ok);
    }
    leap_durations_.push_back(d);
    leap_kv_used_.push_back(kv_.num_used());
    t = end;
  }
  leapt_ += static_cast<int64_t>(leap_durations_.size());
  return t;
}

void Replica::finish_leap(Time now) {
  // The first iteration, then the rest; the group emitted one token in each, and requests finish
  // only in the last.
  record_.emitted = record_.num_seqs;
  record_.grouped = batch_.group;
  record_.group_gap = first_end_ - group_end_;
  for (Recorder* rec : recorders_) rec->on_iteration(record_, batch_.items);
  // Requests that arrived during the leap wait from the first iteration starting at or after
  // their arrival (arrivals at an instant are queued before the iteration starting then is formed).
  leap_waiting_.clear();
  Time start = first_end_;
  size_t arrived = 0;
  for (const Time d : leap_durations_) {
    while (arrived < leap_arrivals_.size() && leap_arrivals_[arrived] <= start) ++arrived;
    leap_waiting_.push_back(record_.waiting + static_cast<int32_t>(arrived));
    start += d;
  }
  arrivals_leapt_past_ += static_cast<int64_t>(leap_arrivals_.size());
  leap_arrivals_.clear();
  const DecodeSteps steps{id_, step_ + 1, first_end_, leap_durations_, leap_kv_used_, leap_waiting_,
                          record_.kv_blocks_total, record_.num_seqs, record_.predicted >= 0};
  for (Recorder* rec : recorders_) rec->on_decode_steps(steps);

  now_ = now;
  const auto k = static_cast<int32_t>(leap_durations_.size());
  const int32_t done = step_group(now, k + 1);
  if (done > 0) {
    std::erase_if(running_, [](const Sequence* s) { return s->status == RequestStatus::kDone; });
  }
  step_ += k + 1;
  leap_durations_.clear();
  busy_ = false;
}

void Replica::finish_iteration(Time now) {
  assert(busy_);
  if (!leap_durations_.empty()) {
    finish_leap(now);
    return;
  }
  now_ = now;
  int32_t group_done = 0;
  if (batch_.group > 0) {
    record_.grouped = batch_.group;
    record_.group_gap = now - group_end_;
    record_.emitted += batch_.group;
    group_done = step_group(now, 1);
  }
  bool any_done = group_done > 0;
  for (BatchItem& item : batch_.items) {
    if (item.padding) continue;
    Request& r = req(item.seq);
    r.num_computed += item.new_tokens;
    assert(r.num_computed <= r.num_tokens());
    if (r.num_computed < r.num_tokens()) continue;  // a prompt chunk that did not finish the prompt
    // Every token is computed: the forward pass produced the next output token.
    item.emitted = true;
    ++record_.emitted;
    ++r.num_output;
    if (!r.held) {
      if (r.first_token < 0) {
        r.first_token = now;
      } else {
        item.token_gap = now - r.last_token;
      }
    }
    r.last_token = now;
    if (r.generation_done()) {
      any_done = true;
      r.status = RequestStatus::kDone;
      kv_.free(r);
      std::vector<int32_t>().swap(r.block_table);  // a finished request keeps no memory
      std::vector<uint64_t>().swap(r.block_hashes);
      if (!r.held) complete(r);
    }
  }
  if (any_done) {
    std::erase_if(running_, [](const Sequence* s) { return s->status == RequestStatus::kDone; });
  }
  // What is left of the group stays one. So does a group the policy took and then dropped (its
  // members paused for a prefill-only iteration): they did not run. Otherwise, when the members
  // ran one by one, the next iteration looks again.
  if (batch_.group == 0 && !group_offered_) group_size_ = 0;
  assert(batch_.group > 0 || !group_offered_ ||
         std::none_of(running_.begin(), running_.begin() + static_cast<std::ptrdiff_t>(group_size_),
                      [&](const Sequence* s) { return req(s).last_token == now; }));
  for (Recorder* rec : recorders_) rec->on_iteration(record_, batch_.items);
  ++step_;
  busy_ = false;
}

void Replica::complete(Request& r) {
  r.finished = now_;
  for (Recorder* rec : recorders_) rec->on_request(r);
  settled_->push_back(r.slot);
}

void Replica::admit(Sequence* seq, int32_t num_cached_tokens) {
  if (!waiting_.empty() && waiting_.front() == seq) {
    waiting_.pop_front();
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
  r.first_token = now_;  // nothing was streamed: the whole response arrives now
  complete(r);
}

}  // namespace servesim
