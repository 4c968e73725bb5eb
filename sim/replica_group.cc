// The replica's decode group and its leaps (sim/replica.h): decodes scheduled, priced and applied
// as one group beside the other items, and runs of repeating all-group iterations applied as one
// event. Both give exactly what listing every item and running every iteration gives.
#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>
#include <utility>
#include <vector>

#include "sim/replica.h"

namespace servesim {
namespace {

// From iteration i of a leap on (starting at t), the value is v: a change noted at i is replaced,
// and a new one noted where v differs from the last.
template <typename Change, typename V>
void note_change(std::vector<Change>& changes, int64_t i, V v, Time t) {
  if (changes.back().iteration == i) {
    changes.back().value = v;
  } else if (changes.back().value != v) {
    changes.push_back({i, v, t});
  }
}

// The ranges of a leap's `count` iterations, the last ending at `end_at`, between the changes of
// the KV use and of the queue.
template <typename KvChange, typename WaitingChange>
void leap_ranges(const std::vector<KvChange>& kv, const std::vector<WaitingChange>& waiting, int64_t count,
                 Time end_at, std::vector<DecodeSteps::Range>& out) {
  out.clear();
  size_t k = 0, w = 0;
  Time at = kv[0].at;
  while (true) {
    const int64_t next_k = k + 1 < kv.size() ? kv[k + 1].iteration : count;
    const int64_t next_w = w + 1 < waiting.size() ? waiting[w + 1].iteration : count;
    const int64_t end = std::min(next_k, next_w);
    const Time next_at = end == count ? end_at : next_k == end ? kv[k + 1].at : waiting[w + 1].at;
    out.push_back({end, kv[k].value, waiting[w].value, next_at - at});
    if (end == count) return;
    at = next_at;
    if (next_k == end) ++k;
    if (next_w == end) ++w;
  }
}

// finish_leap walks at most this many iterations to an arrival rather than start from a known one.
constexpr int64_t kWalkAtMost = 8;

}  // namespace

void Replica::enable_grouping(bool on) {
  grouping_ = on && backend_->prices_decode_groups();
}

bool Replica::decodes_in_step(const Sequence* seq) const {
  const Request& r = req(seq);
  return !r.held && r.num_output > 0 && r.num_uncomputed() == 1 && r.last_token == group_end_;
}

size_t Replica::bucket_of(const Sequence* seq) const {
  // computed() - group_steps_, which a member keeps as the group runs and as it syncs.
  const int64_t bs = kv_.block_size();
  const int64_t b = (seq->num_computed - seq->group_synced) % bs;
  return static_cast<size_t>(b < 0 ? b + bs : b);
}

void Replica::sync(Sequence* seq) const {
  const int64_t behind = group_steps_ - seq->group_synced;
  if (behind == 0) return;
  seq->num_computed += static_cast<int32_t>(behind);
  seq->num_output += static_cast<int32_t>(behind);
  req(seq).last_token = group_end_;  // the end of the group's last iteration, which it ran
  seq->group_synced = group_steps_;
}

void Replica::sync_group() {
  for (const auto& bucket : buckets_) {
    for (const Member& m : bucket) sync(m.seq);
  }
}

void Replica::note_occupancy(size_t b) {
  const uint64_t bit = uint64_t{1} << (b % 64);
  occupied_[b / 64] = buckets_[b].empty() ? occupied_[b / 64] & ~bit : occupied_[b / 64] | bit;
}

void Replica::join_group(Sequence* seq) {
  const Request& r = req(seq);
  assert(seq->group_ticket == 0);
  const uint64_t ticket = tickets_++;
  seq->group_ticket = ticket;
  seq->group_synced = group_steps_;
  const size_t b = bucket_of(seq);
  buckets_[b].push_back({ticket, seq});
  note_occupancy(b);
  const int32_t left = r.output_tokens - r.num_output;
  if (seq->group_heaped != group_steps_ + left) {  // else its entry from before is valid again
    if (finishes_.size() >= 2 * group_size_ + 1024) compact_finishes();
    finishes_.push_back({group_steps_ + left, seq});
    std::push_heap(finishes_.begin(), finishes_.end(), finishes_later);
    seq->group_heaped = group_steps_ + left;
  }
  group_context_ += r.num_computed;
  group_min_left_ = std::min(group_min_left_, left);
  ++group_size_;
}

void Replica::leave_group(Sequence* seq) {
  sync(seq);
  const size_t b = bucket_of(seq);
  std::vector<Member>& bucket = buckets_[b];
  const auto it = std::find_if(bucket.begin(), bucket.end(), [seq](const Member& m) { return m.seq == seq; });
  assert(it != bucket.end());
  bucket.erase(it);
  note_occupancy(b);
  seq->group_ticket = 0;  // its entry in finishes_ stays (see finishes_)
  group_context_ -= seq->num_computed;
  --group_size_;  // group_min_left_ stays a lower bound
}

void Replica::leave_group_from(uint64_t ticket) {
  // The members from `ticket` on are running_[k, group_size_) for some k: the group's tail.
  for (size_t b = 0; b < buckets_.size(); ++b) {
    std::erase_if(buckets_[b], [&](const Member& m) {
      if (m.ticket < ticket) return false;
      sync(m.seq);
      m.seq->group_ticket = 0;
      group_context_ -= m.seq->num_computed;
      --group_size_;
      return true;
    });
    note_occupancy(b);
  }
}

void Replica::dissolve_group() {
  for (auto& bucket : buckets_) {
    for (const Member& m : bucket) {
      sync(m.seq);
      m.seq->group_ticket = 0;
    }
    bucket.clear();
  }
  std::fill(occupied_.begin(), occupied_.end(), 0);
  for (const Finish& f : finishes_) f.seq->group_heaped = -1;
  finishes_.clear();
  group_size_ = 0;
  group_context_ = 0;
  group_min_left_ = std::numeric_limits<int32_t>::max();
}

std::span<const Replica::Member> Replica::touched_members(size_t opens) {
  const std::vector<Member>& opening = buckets_[opens];
  const int32_t bs = kv_.block_size();
  if (!kv_.prefix_caching() || bs == 1) return opening;
  const std::vector<Member>& filling = buckets_[opens == 0 ? static_cast<size_t>(bs) - 1 : opens - 1];
  touched_.assign(opening.begin(), opening.end());
  const size_t mid = touched_.size();
  touched_.insert(touched_.end(), filling.begin(), filling.end());
  std::inplace_merge(touched_.begin(), touched_.begin() + static_cast<std::ptrdiff_t>(mid), touched_.end(),
                     [](const Member& a, const Member& b) { return a.ticket < b.ticket; });
  return touched_;
}

DecodeGroup Replica::schedule_decode_group(Batch& batch, int64_t max, GroupPreemption preemption) {
  assert(batch.empty());
  if (!grouping_) return {};
  // Who belongs: what is left of the group that ran last, and the requests behind it that decode
  // and emitted their last token with it (those that were just prefilled, when it ran too).
  if (group_size_ == 0) {
    if (running_.empty()) return {};
    dissolve_group();  // what is left of a group that became empty
    buckets_.resize(static_cast<size_t>(kv_.block_size()));
    occupied_.resize((buckets_.size() + 63) / 64, 0);
    group_end_ = req(running_.front()).last_token;
  }
  while (group_size_ < running_.size() && decodes_in_step(running_[group_size_])) {
    join_group(running_[group_size_]);
  }
  if (group_size_ == 0) return {};
  if (static_cast<int64_t>(group_size_) > max) {
    dissolve_group();  // the policy lists them one by one, from their counters
    return {};
  }

  // As the policy would one by one, in running order: each member allocates room for its next
  // token. That takes a block when the token opens one; with prefix caching it also registers the
  // block the token fills. For every other member the allocation changes nothing. A member that
  // finds no free block either leaves the group with those after it, for the policy to go on
  // from, one by one (the members before it are the group), or has the group preempt for it from
  // the back of the running set, as the policy would.
  DecodeGroup scheduled;
  const int64_t bs = kv_.block_size();
  std::span<const Member> touched = touched_members(opens_at_);  // valid until the buckets change
  for (size_t i = 0; i < touched.size(); ++i) {
    const Member m = touched[i];
    const int64_t next = computed(m.seq) + 1;
    const bool opens = next > static_cast<int64_t>(m.seq->block_table.size()) * bs;
    if (opens && kv_.num_free() < 1) {
      if (preemption == GroupPreemption::kByPolicy) {
        leave_group_from(m.ticket);
        break;
      }
      while (kv_.num_free() < 1) {
        Sequence* victim = running_.back();
        preempt(victim);  // a member leaves the group
        scheduled.preempted = true;
        if (victim == m.seq) break;
      }
      if (m.seq->group_ticket == 0) break;  // preempted: so are all after it
      // The members preempted came after m; m is at the same place among those left.
      touched = touched_members(opens_at_);
      i = static_cast<size_t>(std::lower_bound(touched.begin(), touched.end(), m.ticket,
                                               [](const Member& a, uint64_t t) { return a.ticket < t; }) -
                              touched.begin());
      assert(i < touched.size() && touched[i].seq == m.seq);
    }
    [[maybe_unused]] const bool ok = kv_.allocate(*m.seq, next);
    assert(ok);
  }
  if (group_size_ == 0) return scheduled;
  batch.group = static_cast<int32_t>(group_size_);
  batch.group_context = group_context_;
  group_offered_ = true;
  scheduled.size = batch.group;
  return scheduled;
}

void Replica::step_group(Time now, int32_t k) {
  // Every member ran the k iterations (the batch's group is the whole group): the group's counts
  // move, and the members' own follow when they leave (sync).
  assert(static_cast<size_t>(batch_.group) == group_size_);
  group_steps_ += k;
  group_context_ += int64_t{k} * batch_.group;
  const int32_t bs = kv_.block_size();
  const int64_t opens = (static_cast<int64_t>(opens_at_) - k) % bs;
  opens_at_ = static_cast<size_t>(opens < 0 ? opens + bs : opens);
  group_end_ = now;
  // The members whose last token this was (none was due earlier: a leap stops at the first), in
  // running order; then the fewest tokens one of the others has left.
  finishing_.clear();
  int32_t min_left = std::numeric_limits<int32_t>::max();
  while (!finishes_.empty()) {
    const Finish& top = finishes_.front();
    if (finish_valid(top)) {
      assert(top.step >= group_steps_);
      if (top.step > group_steps_) {
        min_left = static_cast<int32_t>(top.step - group_steps_);
        break;
      }
      finishing_.push_back({top.seq->group_ticket, top.seq});
      top.seq->group_ticket = 0;  // taken once (an entry may have a twin)
    }
    pop_finish();
  }
  std::sort(finishing_.begin(), finishing_.end(), [](const Member& a, const Member& b) { return a.ticket < b.ticket; });
  for (const Member& f : finishing_) {
    Request& r = req(f.seq);
    leave_group(&r);
    assert(r.num_output == r.output_tokens && r.last_token == now);
    finish_generation(r);
    leaving_.push_back(&r);
  }
  group_min_left_ = min_left;
}

void Replica::pop_finish() {
  Sequence* seq = finishes_.front().seq;
  if (seq->group_heaped == finishes_.front().step) seq->group_heaped = -1;
  std::pop_heap(finishes_.begin(), finishes_.end(), finishes_later);
  finishes_.pop_back();
}

void Replica::compact_finishes() {
  std::erase_if(finishes_, [&](const Finish& f) {
    if (finish_valid(f)) return false;
    if (f.seq->group_heaped == f.step) f.seq->group_heaped = -1;
    return true;
  });
  std::make_heap(finishes_.begin(), finishes_.end(), finishes_later);
}

bool Replica::batch_leapable() {
  // The decode group of every running request, formed without a preemption, none of it finishing
  // in this very iteration (which leaves no run to leap over).
  // On a decode replica, prompts whose KV waits for blocks here take them at the next decision.
  if (preempted_ > 0 || !batch_.items.empty() || static_cast<size_t>(batch_.group) != running_.size() ||
      group_min_left_ <= 1 || !incoming_.empty()) {
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
  if (t >= horizon || !backend_->decode_run(batch_, leap_run_)) return t;
  if (leap_run_.at(0) != record_.duration) {
    assert(false && "a backend's decode run disagrees with run()");
    return t;
  }
  DecodeDurationCursor duration(leap_run_);
  duration.next();  // the iteration in flight
  // Iteration j (the first is 0) emits every member's token num_output + j + 1; none may finish
  // before the last iteration of the leap.
  const int64_t steps = group_min_left_;
  const int32_t bs = kv_.block_size();
  leap_kv_changes_.assign(1, {0, kv_.num_used(), t});
  // As the policy would at the start of iteration j, every member allocates room for its token
  // c + j + 1 (c: its context in iteration 0, computed()). That takes a block when token c + j starts one, for
  // the members whose bucket is j below opens_at_; with prefix caching it also registers the block
  // that token c + j + 1 fills, for those one bucket further. For every other member the
  // allocation changes nothing. Bucket b touches when its members opening a block (or, with
  // prefix caching, those of the bucket before filling one) make the iteration allocate.
  const auto n = static_cast<size_t>(bs);
  touches_.assign(occupied_.begin(), occupied_.end());
  if (kv_.prefix_caching()) {  // bucket b also when bucket b - 1 (mod n) holds members
    uint64_t carry = (occupied_[(n - 1) / 64] >> ((n - 1) % 64)) & 1;
    for (size_t w = 0; w < occupied_.size(); ++w) {
      touches_[w] |= occupied_[w] << 1 | carry;
      carry = occupied_[w] >> 63;
    }
    if (n % 64 != 0) touches_.back() &= (uint64_t{1} << (n % 64)) - 1;
  }
  // How many iterations after one with opens = b only take their time: the next has opens = b - 1,
  // and so on down (mod n) to the first bucket that touches (there is one: the batch is the group).
  assert(group_size_ > 0);
  const auto plain_after = [&](size_t b) -> int64_t {
    const size_t p = b == 0 ? n - 1 : b - 1;
    size_t w = p / 64;
    uint64_t bits = touches_[w] & (p % 64 == 63 ? ~uint64_t{0} : (uint64_t{2} << (p % 64)) - 1);
    while (bits == 0) {  // down a word, past 0 to the last
      w = w == 0 ? touches_.size() - 1 : w - 1;
      bits = touches_[w];
    }
    const size_t h = w * 64 + 63 - static_cast<size_t>(std::countl_zero(bits));  // the touching bucket
    return static_cast<int64_t>(p >= h ? p - h : p + n - h);
  };
  // A plain stretch (fewer than n iterations) is summed first and checked against the horizons
  // after, when its durations are small enough that the sum cannot overflow (they grow with j).
  const bool sum_first = leap_run_.at(steps) <= (int64_t{1} << 62) / static_cast<int64_t>(n);
  size_t opens = opens_at_;
  int64_t j = 1;
  while (j < steps && t < horizon) {
    const int64_t plain_end = std::min(steps, j + plain_after(opens));
    const int64_t plain_start = j;
    if (sum_first && j < plain_end) {
      DecodeDurationCursor ahead = duration;
      Time last_start = t, end = t;
      for (int64_t i = j; i < plain_end; ++i) {
        last_start = end;
        end += ahead.next();
      }
      if (last_start < horizon && end <= kTimeHorizon) {  // else stepped one by one below
        duration = ahead;
        t = end;
        j = plain_end;
      }
    }
    for (; j < plain_end && t < horizon; ++j) {
      // add_time's check, cheaper: t is at most kTimeHorizon and a duration below 2^62 plus that
      // (decode_durations.h), so their sum does not overflow.
      const Time end = t + duration.next();
      if (end > kTimeHorizon) break;
      t = end;
    }
    if (j < plain_end || j == steps || t >= horizon) break;  // stopped by the time, or at the end
    const auto back = static_cast<size_t>(plain_end - plain_start);  // at most plain_after(): < n
    assert(back < n);
    opens = opens >= back ? opens - back : opens + n - back;
    // Iteration j allocates.
    opens = opens == 0 ? n - 1 : opens - 1;
    const std::vector<Member>& opening = buckets_[opens];
    int64_t need = 0;
    for (const Member& m : opening) {
      if (computed(m.seq) + j + 1 > static_cast<int64_t>(m.seq->block_table.size()) * bs) ++need;
    }
    if (need > kv_.num_free()) break;  // the policy would preempt here: run it one by one
    const Time end = add_time(t, duration.next());
    if (end == kNever) break;  // run one by one, which reports the horizon
    for (const Member& m : touched_members(opens)) {
      [[maybe_unused]] const bool ok = kv_.allocate(*m.seq, computed(m.seq) + j + 1);
      assert(ok);
    }
    note_change(leap_kv_changes_, j - 1, kv_.num_used(), t);
    t = end;
    ++j;
  }
  leap_count_ = j - 1;
  leapt_ += leap_count_;
  return t;
}

void Replica::finish_leap(Time now) {
  // The first iteration, then the rest; the group emitted one token in each, and requests finish
  // only in the last.
  record_.emitted = record_.num_seqs;
  record_.grouped = batch_.group;
  record_.group_gap = first_end_ - group_end_;
  for (Recorder* rec : recorders_) rec->on_iteration(record_, batch_.items);
  const DecodeDurations leapt = leap_run_.shifted(1);
  // Requests that arrived during the leap wait from the first iteration starting at or after
  // their arrival (arrivals at an instant are queued before the iteration starting then is formed):
  // where the waiting count changes, (iteration, waiting).
  std::vector<LeapChange<int32_t>>& waiting = leap_waiting_changes_;
  waiting.assign(1, {0, record_.waiting, first_end_});
  if (!leap_arrivals_.empty()) {
    DecodeDurationCursor duration(leapt);
    Time start = first_end_;  // iteration i's
    int64_t i = 0;
    size_t arrived = 0;
    size_t known = 0;  // leap_kv_changes_[known]: an iteration whose start leap() noted
    while (arrived < leap_arrivals_.size()) {
      // On to the first iteration starting at or after the next arrival; the count changes there.
      // From the last iteration before it whose start is known, when that is further on.
      const Time at = leap_arrivals_[arrived];
      while (known + 1 < leap_kv_changes_.size() && leap_kv_changes_[known + 1].at < at) ++known;
      if (leap_kv_changes_[known].iteration > i + kWalkAtMost) {
        i = leap_kv_changes_[known].iteration;
        start = leap_kv_changes_[known].at;
        duration = DecodeDurationCursor(leapt.shifted(i));
      }
      for (; i < leap_count_ && start < at; ++i) start += duration.next();
      if (i == leap_count_) break;
      while (arrived < leap_arrivals_.size() && leap_arrivals_[arrived] <= start) ++arrived;
      note_change(waiting, i, record_.waiting + static_cast<int32_t>(arrived), start);
    }
  }
  arrivals_leapt_past_ += static_cast<int64_t>(leap_arrivals_.size());
  leap_arrivals_.clear();
  leap_ranges(leap_kv_changes_, waiting, leap_count_, now, leap_ranges_);
  const DecodeSteps steps{id_, step_ + 1, first_end_, leap_count_, leapt, leap_ranges_,
                          record_.kv_blocks_total, record_.num_seqs, record_.predicted >= 0};
  for (Recorder* rec : recorders_) rec->on_decode_steps(steps);

  now_ = now;
  const auto k = static_cast<int32_t>(leap_count_);
  leaving_.clear();
  step_group(now, k + 1);
  if (!leaving_.empty()) drop_leaving();
  step_ += k + 1;
  leap_count_ = 0;
  busy_ = false;
}

}  // namespace servesim
