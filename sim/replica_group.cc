// The replica's decode group (sim/replica.h): decodes scheduled, priced and applied as one group
// beside the other items, which gives exactly what listing every item gives. Its leaps over
// repeating iterations are in replica_leap.cc.
#include <algorithm>
#include <cassert>
#include <limits>
#include <span>
#include <vector>

#include "sim/replica.h"

namespace servesim {

void Replica::enable_grouping(bool on) {
  grouping_ = on && backend_->prices_decode_groups() && !kv_.hybrid();
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

std::span<const Replica::Member> Replica::touched_with_filling(size_t opens) {
  const std::vector<Member>& opening = buckets_[opens];
  const int32_t bs = kv_.block_size();
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

}  // namespace servesim
