#include "analysis/reports/progress.h"

#include <algorithm>
#include <cstdio>

namespace servesim {
namespace {

std::string compact(double v) {  // 1234567 -> "1.2M"
  char buf[32];
  if (v >= 1e9) std::snprintf(buf, sizeof buf, "%.1fG", v / 1e9);
  else if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
  else if (v >= 1e4) std::snprintf(buf, sizeof buf, "%.0fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string duration(double s) {  // "45 s", "12 min", "3.2 h"
  char buf[32];
  if (s < 100) std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s < 6000) std::snprintf(buf, sizeof buf, "%.0f min", s / 60);
  else std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

}  // namespace

ProgressLine::ProgressLine(std::ostream& out, int64_t total, bool steps, std::function<int64_t()> total_later)
    : out_(out), total_(total), steps_(steps), total_later_(std::move(total_later)), thread_([this] { draw_loop(); }) {}

ProgressLine::~ProgressLine() { stop(); }

void ProgressLine::on_iteration(const IterationRecord& it, std::span<const BatchItem> /*items*/) {
  counts_.add_iterations(1, it.start);
}

void ProgressLine::on_decode_steps(const DecodeSteps& steps) { counts_.add_iterations(steps.count, steps.start); }

void ProgressLine::on_request(const Request& /*r*/) { counts_.add_settled(); }

class ProgressLine::Shard final : public Recorder {
 public:
  explicit Shard(Counts& counts) : counts_(counts) {}
  bool accepts_grouped_decodes() const override { return true; }
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> /*items*/) override {
    counts_.add_iterations(1, it.start);
  }
  void on_decode_steps(const DecodeSteps& steps) override { counts_.add_iterations(steps.count, steps.start); }
  void on_request(const Request& /*r*/) override { counts_.add_settled(); }

 private:
  Counts& counts_;
};

std::unique_ptr<Recorder> ProgressLine::shard() {
  std::lock_guard<std::mutex> lock(mutex_);
  shards_.push_back(std::make_unique<Counts>());
  return std::make_unique<Shard>(*shards_.back());
}

void ProgressLine::on_run_end(RunOutcome /*outcome*/, const std::string& /*error*/) { stop(); }

std::string ProgressLine::format(double sim_seconds, bool steps, int64_t settled, int64_t total,
                                 double iterations_per_second, double elapsed_seconds) {
  char head[64];
  std::snprintf(head, sizeof head, steps ? "sim step %.0f" : "sim %.1f s", sim_seconds);
  std::string line = head;
  line += " | " + std::to_string(settled) + (total > 0 ? "/" + std::to_string(total) : "") + " requests";
  line += " | " + compact(iterations_per_second) + " it/s";
  if (total > 0 && settled > 0 && settled < total) {
    line += " | ETA " + duration(elapsed_seconds * static_cast<double>(total - settled) / static_cast<double>(settled));
  }
  return line;
}

void ProgressLine::draw_loop() {
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  int64_t last_iterations = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; })) {
    const auto now = std::chrono::steady_clock::now();
    int64_t iterations = counts_.iterations.load(std::memory_order_relaxed);
    int64_t settled = counts_.settled.load(std::memory_order_relaxed);
    Time at = shards_.empty() ? counts_.now.load(std::memory_order_relaxed) : kNever;
    for (const auto& c : shards_) {
      iterations += c->iterations.load(std::memory_order_relaxed);
      settled += c->settled.load(std::memory_order_relaxed);
      at = std::min(at, c->now.load(std::memory_order_relaxed));
    }
    const double dt = std::chrono::duration<double>(now - last).count();
    const double rate = dt > 0 ? static_cast<double>(iterations - last_iterations) / dt : 0;
    last = now;
    last_iterations = iterations;
    const double sim = to_seconds(at);  // unit: one step a second
    if (total_ <= 0 && total_later_) total_ = total_later_();
    std::string line = format(sim, steps_, settled, total_, rate,
                              std::chrono::duration<double>(now - start).count());
    const size_t length = line.size();
    if (line.size() < drawn_) line += std::string(drawn_ - line.size(), ' ');
    out_ << '\r' << line << std::flush;
    drawn_ = length;
  }
}

void ProgressLine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  if (drawn_ > 0) out_ << '\r' << std::string(drawn_, ' ') << '\r' << std::flush;  // cleared
}

}  // namespace servesim
