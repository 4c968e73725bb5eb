#include "analysis/progress.h"

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
  iterations_.store(iterations_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  now_.store(it.start, std::memory_order_relaxed);
}

void ProgressLine::on_decode_steps(const DecodeSteps& steps) {
  iterations_.store(iterations_.load(std::memory_order_relaxed) + steps.count,
                    std::memory_order_relaxed);
  now_.store(steps.start, std::memory_order_relaxed);
}

void ProgressLine::on_request(const Request& /*r*/) {
  settled_.store(settled_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
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
    const int64_t iterations = iterations_.load(std::memory_order_relaxed);
    const double dt = std::chrono::duration<double>(now - last).count();
    const double rate = dt > 0 ? static_cast<double>(iterations - last_iterations) / dt : 0;
    last = now;
    last_iterations = iterations;
    const double sim = to_seconds(now_.load(std::memory_order_relaxed));  // unit: one step a second
    if (total_ <= 0 && total_later_) total_ = total_later_();
    std::string line = format(sim, steps_, settled_.load(std::memory_order_relaxed), total_, rate,
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
