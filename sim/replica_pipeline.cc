// The replica's pipeline stages (sim/replica.h, start_iteration): several batches in flight, each
// passing the stages in order, their results applied as each leaves the last stage.
#include <algorithm>
#include <cassert>
#include <span>
#include <string>
#include <utility>

#include "sim/format_number.h"
#include "sim/replica.h"

namespace servesim {

Time Replica::start_in_pipeline(Time now) {
  backend_->run_stages(batch_, stage_time_, send_time_);
  // A flow shop: the batch enters stage s once it left stage s - 1 and its activations arrived,
  // and once the batch before it left stage s.
  Time t = now;
  for (size_t s = 0; s < stage_free_.size() && t != kNever; ++s) {
    assert(stage_time_[s] > 0);
    const Time end = add_time(std::max(t, stage_free_[s]), stage_time_[s]);
    stage_free_[s] = end;
    t = s + 1 < stage_free_.size() ? add_time(end, send_time_[s]) : end;
  }
  if (t == kNever) {
    failure_ = "iteration " + std::to_string(step_) + " of replica " + std::to_string(id_) + ", starting at " +
               format_number(to_seconds(now)) + " s, would leave its last pipeline stage past the simulation "
               "horizon of 1e9 s; check the hardware's bandwidth, FLOP/s and overhead_us";
    return kNever;
  }
  record_.duration = t - now;
  record_.predicted = record_.duration;
  ++step_;  // the next batch's number (the batches are recorded in this order as they complete)
  InFlight f;
  if (!spare_.empty()) {
    f = std::move(spare_.back());
    spare_.pop_back();
  }
  f.preemptions.clear();
  // As vLLM's scheduler (_update_after_schedule): the tokens count as computed once scheduled.
  for (const BatchItem& item : batch_.items) {
    f.preemptions.push_back(item.seq->preemptions);
    if (!item.padding) item.seq->num_computed += item.new_tokens;
  }
  std::swap(f.batch, batch_);
  f.record = record_;
  in_flight_.push_back(std::move(f));
  busy_ = in_flight_.size() >= static_cast<size_t>(depth_);
  return t;
}

void Replica::finish_pipelined(Time now) {
  assert(!in_flight_.empty());
  InFlight& f = in_flight_.front();
  now_ = now;
  leaving_.clear();
  for (size_t k = 0; k < f.batch.items.size(); ++k) {
    BatchItem& item = f.batch.items[k];
    if (item.padding) continue;
    Request& r = req(item.seq);
    if (r.preemptions != f.preemptions[k]) continue;  // preempted while in flight: its output is dropped
    assert(r.num_computed <= r.num_tokens());
    if (item.context_tokens + item.new_tokens < r.num_tokens()) continue;  // a chunk short of the prompt's end
    ++f.record.emitted;
    emit_token(item, r, now);
  }
  if (!leaving_.empty()) drop_leaving();
  for (Recorder* rec : recorders_) rec->on_iteration(f.record, f.batch.items);
  spare_.push_back(std::move(f));
  in_flight_.pop_front();
  busy_ = false;
}

}  // namespace servesim
