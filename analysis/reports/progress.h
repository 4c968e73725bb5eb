// The progress line of a long run: on a terminal, one line on stderr, redrawn four times a second
// and cleared at the end, with the simulated time, the requests settled out of all, iterations
// per second and the time left. A Recorder whose callbacks only bump counters (relaxed atomics: a
// plain store each, nothing the run waits on); a thread of its own reads and draws them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "sim/recorder.h"

namespace servesim {

class ProgressLine : public Recorder {
 public:
  // total: the requests in the workload (0: unknown); steps: times are iterations (unit backend).
  // total_later: asked at each drawing while the total is unknown (a trace read beside the run,
  // which counts its rows once it is read); it gives 0 until it knows.
  ProgressLine(std::ostream& out, int64_t total, bool steps, std::function<int64_t()> total_later = {});
  ~ProgressLine() override;

  bool accepts_grouped_decodes() const override { return true; }
  void on_iteration(const IterationRecord& it, std::span<const BatchItem> items) override;
  void on_decode_steps(const DecodeSteps& steps) override;
  void on_request(const Request& r) override;
  void on_run_end(RunOutcome outcome, const std::string& error) override;
  // A split run's groups count on their own; the line shows their sums, at the time of the group
  // furthest behind.
  bool can_shard() const override { return true; }
  std::unique_ptr<Recorder> shard() override;

  // The line for these counts: "sim 12.3 s | 450/1000 requests | 1.2M it/s | ETA 3 s".
  static std::string format(double sim_seconds, bool steps, int64_t settled, int64_t total,
                            double iterations_per_second, double elapsed_seconds);

 private:
  void draw_loop();
  void stop();

  // What one thread's callbacks count.
  struct Counts {
    std::atomic<int64_t> iterations{0}, settled{0};
    std::atomic<Time> now{0};
    void add_iterations(int64_t n, Time start) {
      iterations.store(iterations.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
      now.store(start, std::memory_order_relaxed);
    }
    void add_settled() { settled.store(settled.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }
  };
  class Shard;

  std::ostream& out_;
  int64_t total_;  // the drawing thread's, once it runs
  const bool steps_;
  const std::function<int64_t()> total_later_;
  Counts counts_;
  std::vector<std::unique_ptr<Counts>> shards_;  // a split run's groups' (under mutex_)
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  size_t drawn_ = 0;  // the length of the line on screen
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace servesim
