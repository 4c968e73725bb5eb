// The replica's leaps (sim/replica.h): runs of repeating iterations of the decode group
// (replica_group.cc) applied as one event, which gives exactly what running every iteration gives.
#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdint>
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
  if (waiting.size() == 1) {  // the queue kept its length (the usual case): a range per KV change
    out.resize(kv.size());
    size_t r = 0;
    for (; r < kv.size(); ++r) {
      const int64_t end = r + 1 < kv.size() ? kv[r + 1].iteration : count;
      const Time next_at = end == count ? end_at : kv[r + 1].at;
      out[r] = {end, kv[r].value, waiting[0].value, next_at - kv[r].at};
      if (end == count) break;
    }
    out.resize(r + 1);
    return;
  }
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

void Replica::find_touching(size_t n) {
  touching_.clear();
  const bool filling = kv_.prefix_caching();  // bucket b also when bucket b - 1 (mod n) holds members
  uint64_t carry = filling ? (occupied_[(n - 1) / 64] >> ((n - 1) % 64)) & 1 : 0;
  for (size_t w = 0; w < occupied_.size(); ++w) {
    uint64_t bits = occupied_[w];
    if (filling) {
      bits |= occupied_[w] << 1 | carry;
      carry = occupied_[w] >> 63;
      if (w + 1 == occupied_.size() && n % 64 != 0) bits &= (uint64_t{1} << (n % 64)) - 1;
    }
    for (; bits != 0; bits &= bits - 1) touching_.push_back(w * 64 + static_cast<size_t>(std::countr_zero(bits)));
  }
}

bool Replica::room_to_open(size_t opens, int64_t j) const {
  const std::vector<Member>& opening = buckets_[opens];
  if (static_cast<int64_t>(opening.size()) <= kv_.num_free()) return true;  // every one finds a block
  const int32_t bs = kv_.block_size();
  int64_t need = 0;
  for (const Member& m : opening) {
    if (computed(m.seq) + j + 1 > static_cast<int64_t>(m.seq->block_table.size()) * bs) ++need;
  }
  return need <= kv_.num_free();
}

Time Replica::leap(Time horizon) {
  assert(busy_ && leapable_);
  leapable_ = false;
  Time t = first_end_;  // the start of the next iteration
  // The batch is the decode group alone: start_iteration priced it through its run, if the backend
  // gives runs.
  if (t >= horizon || !leap_run_known_) return t;
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
  // The touching buckets, ascending (there is one: the batch is the group). The iterations that
  // allocate come in their order downwards (mod n): after one with opens = touching_[i], the next
  // opens = touching_[i - 1] (or the last), and those between only take their time.
  find_touching(n);
  assert(group_size_ > 0 && !touching_.empty());
  // The iterations after one with opens = b that only take their time, down to the next that
  // allocates, touching_[next].
  const auto plain_after = [n](size_t b, size_t h) -> int64_t {
    const size_t p = b == 0 ? n - 1 : b - 1;
    return static_cast<int64_t>(p >= h ? p - h : p + n - h);
  };
  // A plain stretch (fewer than n iterations) is summed first and checked against the horizons
  // after, when its durations are small enough that the sum cannot overflow (they grow with j).
  const bool sum_first = leap_run_.at(steps) <= (int64_t{1} << 62) / static_cast<int64_t>(n);
  size_t opens = opens_at_;
  // The first to allocate: the largest touching bucket below opens_at_, else the largest (mod n).
  const size_t first_below = opens == 0 ? n - 1 : opens - 1;
  size_t next = static_cast<size_t>(std::upper_bound(touching_.begin(), touching_.end(), first_below) -
                                    touching_.begin());
  next = next == 0 ? touching_.size() - 1 : next - 1;
  int64_t j = 1;
  while (j < steps && t < horizon) {
    const int64_t plain_end = std::min(steps, j + plain_after(opens, touching_[next]));
    if (sum_first && j < plain_end) {
      DecodeDurationCursor ahead = duration;
      Time last = 0;
      const Time end = t + ahead.sum(plain_end - j, &last);
      if (end - last < horizon && end <= kTimeHorizon) {  // else stepped one by one below
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
    // Iteration j allocates: its opens is the next touching bucket.
    opens = touching_[next];
    next = next == 0 ? touching_.size() - 1 : next - 1;
    if (!room_to_open(opens, j)) break;  // the policy would preempt here: run it one by one
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
