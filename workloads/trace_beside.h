// A CSV trace (csv, vidur or azure format) read on a thread of its own while the simulation takes its
// requests, so that a run starts at its first row rather than after its last (runner/run.cc).
//
// The rows are given in place as they are read, their arrivals shifted so that the first is at 0,
// as replay_trace gives them. Two things only the whole file tells are found out as the reading goes
// on: a bad row, and a row that arrives before the one above it (replay_trace would sort the file).
// From such a row on nothing more is given; next_in_place() then gives nullptr and error() says why.
// The caller records nothing before the outcome is known (when_read()): a failed reading means the
// run did not happen; an unsorted trace (or one that grew while read) that it must be run again,
// from the workload read the usual way.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim/request.h"
#include "sim/request_stream.h"
#include "workloads/replay.h"

namespace servesim {

class TraceReadBeside final : public RequestStream {
 public:
  // kStopped: stop() came first.
  enum class Outcome { kRead, kFailed, kReadAgain, kStopped };

  // Starts reading options.path, whose format (csv, vidur or azure) the caller has detected. Errors: the file's size cannot be had, or no thread can (the caller then reads the
  // trace itself).
  static Result<std::unique_ptr<TraceReadBeside>> start(const ReplayOptions& options);
  // Stops the reading if it goes on, and waits for its thread.
  ~TraceReadBeside() override;
  TraceReadBeside(const TraceReadBeside&) = delete;
  TraceReadBeside& operator=(const TraceReadBeside&) = delete;

  bool next(RequestSpec& spec) override;
  // The next row, waiting for the reader when it has not got there yet; nullptr after the last row,
  // or at a bad or unsorted one.
  const RequestSpec* next_in_place() override;
  bool gives_in_place() const override { return true; }
  // Empty unless next_in_place() gave nullptr before the trace's end: at a bad row (the reader's
  // message), at an unsorted one or a stopped reading (why), or after cut() (its why).
  const std::string& error() const override;

  // Waits until the whole file is read, or the reading stopped at a bad row (kFailed) or at an
  // unsorted one, or at more rows than the file's size allowed for (kReadAgain).
  Outcome wait();
  // Calls done(outcome) once the reading is over: on the reader's thread, or on this one at once
  // if it is over already. Once only.
  void when_read(std::function<void(Outcome)> done);
  // Stops the reading (the outcome is then kStopped, unless it was over already).
  void stop() { stop_.store(true, std::memory_order_relaxed); }
  // From the next request on, next_in_place() gives nullptr, and error() says `why` (the run is not
  // to go on). Any thread.
  void cut(std::string why);
  // Stops the reading, and waits until its thread (and its when_read call) is done.
  void join();
  // After wait(): the message of a failed reading.
  const std::string& failure() const { return failure_; }
  // After wait(): the rows read (for kRead, the workload's size).
  int64_t rows() const;
  // The workload's size once the trace has been read whole and good, else 0. Any thread.
  int64_t read_rows() const;
  // The last row's arrival once the trace has been read whole and good, else -1. Any thread.
  Time last_arrival() const override;
  // How many requests the trace is judged to hold, from its size and the bytes of its first rows
  // (exact once it is read): for reserving room. Waits for those rows.
  int64_t expected_rows();

 private:
  explicit TraceReadBeside(ReplayOptions options);
  void read();
  static constexpr uint64_t kStateBits = 3, kStateMask = 7;
  // Publishes `rows` rows and the state (one word, so that a waiter sees both at once).
  void publish(uint64_t rows, uint64_t state);
  const RequestSpec& at(uint64_t i) const { return blocks_[i / kBlock][i % kBlock]; }

  static constexpr uint64_t kBlock = 4096;
  // The reader's state, in the low bits of published_.
  static constexpr uint64_t kReading = 0, kDone = 1, kFailed = 2, kAgain = 3, kStopped = 4;

  ReplayOptions options_;
  // The rows, in blocks that never move; room for every block the file could fill is made first.
  std::vector<std::unique_ptr<RequestSpec[]>> blocks_;
  std::atomic<uint64_t> published_{0};  // rows << 3 | state
  std::atomic<int64_t> expected_{-1};   // the reader's judgement of the rows (TraceRowSink::reserve)
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::string cut_why_;  // written before cut_ is set
  std::mutex done_mutex_;
  bool over_ = false;                        // the reading is over (under done_mutex_)
  std::function<void(Outcome)> when_read_;   // (under done_mutex_)
  std::string failure_;     // written before the state says kFailed
  std::string error_;       // next_in_place()'s
  uint64_t taken_ = 0;      // rows given out
  uint64_t known_ = 0;      // rows known to be published (the last word read)
  uint64_t known_state_ = kReading;
  std::thread thread_;      // last: started once the rest is ready
};

}  // namespace servesim
