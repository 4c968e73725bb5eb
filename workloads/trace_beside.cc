#include "workloads/trace_beside.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "workloads/azure_trace.h"
#include "workloads/csv_trace.h"

namespace servesim {
namespace {

// The shortest row a file can hold: three one-character cells, two commas and a line end.
constexpr uint64_t kShortestRow = 6;
// The rows published at a time: each publication may wake the simulation.
constexpr uint64_t kPublishEvery = 256;

}  // namespace

TraceReadBeside::TraceReadBeside(ReplayOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<TraceReadBeside>> TraceReadBeside::start(const ReplayOptions& options) {
  std::unique_ptr<TraceReadBeside> t(new TraceReadBeside(options));
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(options.path, ec);
  if (ec) return Error{options.path + ": " + ec.message()};
  t->blocks_.reserve(static_cast<size_t>(bytes / kShortestRow / kBlock + 2));
  try {
    t->thread_ = std::thread([p = t.get()] { p->read(); });
  } catch (const std::system_error& e) {
    return Error{std::string("no thread to read the trace beside the run: ") + e.what()};
  }
  return t;
}

TraceReadBeside::~TraceReadBeside() { join(); }

void TraceReadBeside::join() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void TraceReadBeside::publish(uint64_t rows, uint64_t state) {
  published_.store(rows << kStateBits | state, std::memory_order_release);
  published_.notify_all();
}

void TraceReadBeside::when_read(std::function<void(Outcome)> done) {
  {
    std::lock_guard<std::mutex> lock(done_mutex_);
    if (!over_) {
      when_read_ = std::move(done);
      return;
    }
  }
  done(wait());
}

void TraceReadBeside::cut(std::string why) {
  cut_why_ = std::move(why);
  cut_.store(true, std::memory_order_release);
}

void TraceReadBeside::read() {
  struct Sink final : TraceRowSink {
    TraceReadBeside& t;
    uint64_t rows = 0;
    Time first = 0, last = 0;
    bool again = false;
    RequestSpec spare;  // the place of a row past the room made: written, never read
    explicit Sink(TraceReadBeside& beside) : t(beside) {}
    void reserve(size_t n) override { t.expected_.store(static_cast<int64_t>(n), std::memory_order_relaxed); }
    RequestSpec& add() override {
      if (rows % kBlock == 0 && rows / kBlock == t.blocks_.size()) {
        // Never past the room made first: the blocks' table must not move under the simulation,
        // which reads it meanwhile.
        if (t.blocks_.size() == t.blocks_.capacity()) {
          again = true;
          return spare = RequestSpec{};
        }
        t.blocks_.emplace_back(new RequestSpec[kBlock]);
      }
      return t.blocks_[rows / kBlock][rows % kBlock];
    }
    bool added() override {
      if (again) return false;
      RequestSpec& spec = t.blocks_[rows / kBlock][rows % kBlock];
      if (rows == 0) first = spec.arrival;
      if (spec.arrival < last) {  // replay_trace sorts such a trace first
        again = true;
        return false;
      }
      last = spec.arrival;
      spec.arrival -= first;  // retime's shift to 0 (the first row arrives first; Azure's: at 0)
      ++rows;
      if (rows % kPublishEvery == 0) t.publish(rows, kReading);
      if (t.stop_.load(std::memory_order_relaxed)) {
        stopped = true;
        return false;
      }
      return true;
    }
    bool stopped = false;
  } sink(*this);
  const Status read = options_.format == TraceFormat::kAzure ? read_azure_trace_rows(options_, sink)
                                                             : read_csv_trace_rows(options_, sink);
  expected_.store(static_cast<int64_t>(sink.rows), std::memory_order_relaxed);
  if (!read) {
    failure_ = read.error().message;
    publish(sink.rows, kFailed);
  } else {
    publish(sink.rows, sink.stopped ? kStopped : sink.again ? kAgain : kDone);
  }
  std::function<void(Outcome)> done;
  {
    std::lock_guard<std::mutex> lock(done_mutex_);
    over_ = true;
    done = std::move(when_read_);
  }
  if (done) done(wait());
}

const RequestSpec* TraceReadBeside::next_in_place() {
  if (cut_.load(std::memory_order_acquire)) {
    error_ = cut_why_;
    return nullptr;
  }
  while (taken_ == known_) {
    if (known_state_ != kReading) {
      if (error_.empty()) {
        error_ = known_state_ == kFailed  ? failure_
                 : known_state_ == kAgain ? "the trace is not in arrival order: read again, sorted"
                 : known_state_ == kStopped ? "stopped"
                                            : "";
      }
      return nullptr;
    }
    uint64_t word = published_.load(std::memory_order_acquire);
    if (word >> kStateBits == known_ && (word & kStateMask) == kReading) {
      published_.wait(word, std::memory_order_acquire);
      word = published_.load(std::memory_order_acquire);
    }
    known_ = word >> kStateBits;
    known_state_ = word & kStateMask;
  }
  return &at(taken_++);
}

bool TraceReadBeside::next(RequestSpec& spec) {
  const RequestSpec* p = next_in_place();
  if (p == nullptr) return false;
  spec = *p;
  return true;
}

const std::string& TraceReadBeside::error() const { return error_; }

TraceReadBeside::Outcome TraceReadBeside::wait() {
  uint64_t word = published_.load(std::memory_order_acquire);
  while ((word & kStateMask) == kReading) {
    published_.wait(word, std::memory_order_acquire);
    word = published_.load(std::memory_order_acquire);
  }
  switch (word & kStateMask) {
    case kDone: return Outcome::kRead;
    case kFailed: return Outcome::kFailed;
    case kStopped: return Outcome::kStopped;
    default: return Outcome::kReadAgain;
  }
}

int64_t TraceReadBeside::rows() const {
  return static_cast<int64_t>(published_.load(std::memory_order_acquire) >> kStateBits);
}

int64_t TraceReadBeside::read_rows() const {
  const uint64_t word = published_.load(std::memory_order_acquire);
  return (word & kStateMask) == kDone ? static_cast<int64_t>(word >> kStateBits) : 0;
}

Time TraceReadBeside::last_arrival() const {
  const int64_t n = read_rows();
  return n > 0 ? at(static_cast<uint64_t>(n - 1)).arrival : -1;
}

int64_t TraceReadBeside::expected_rows() {
  while (true) {
    const uint64_t word = published_.load(std::memory_order_acquire);
    if ((word & kStateMask) != kReading) return static_cast<int64_t>(word >> kStateBits);
    if (const int64_t e = expected_.load(std::memory_order_relaxed); e >= 0) return e;
    published_.wait(word, std::memory_order_acquire);
  }
}

}  // namespace servesim
