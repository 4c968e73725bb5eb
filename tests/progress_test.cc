#include "analysis/reports/progress.h"

#include <atomic>

#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <thread>

namespace servesim {
namespace {

TEST(ProgressLine, SaysWhereTheRunIsAndHowLongIsLeft) {
  EXPECT_EQ(ProgressLine::format(12.34, false, 450, 1000, 1.23e6, 9),
            "sim 12.3 s | 450/1000 requests | 1.2M it/s | ETA 11 s");
  EXPECT_EQ(ProgressLine::format(7, true, 3, 5, 40, 1), "sim step 7 | 3/5 requests | 40 it/s | ETA 1 s");
  // No ETA before the first request settles, nor once all have; no total when it is unknown.
  EXPECT_EQ(ProgressLine::format(0, false, 0, 10, 0, 1), "sim 0.0 s | 0/10 requests | 0 it/s");
  EXPECT_EQ(ProgressLine::format(5, false, 10, 10, 25000, 1), "sim 5.0 s | 10/10 requests | 25k it/s");
  EXPECT_EQ(ProgressLine::format(5, false, 10, 0, 25000, 1), "sim 5.0 s | 10 requests | 25k it/s");
  EXPECT_EQ(ProgressLine::format(5, false, 100, 1000, 25000, 60), "sim 5.0 s | 100/1000 requests | 25k it/s | ETA 9 min");
  EXPECT_EQ(ProgressLine::format(5, false, 1, 1000, 25000, 60), "sim 5.0 s | 1/1000 requests | 25k it/s | ETA 16.6 h");
}

// The line is drawn in place (\r), redrawn while the run goes on, and wiped at the end, leaving
// the cursor at the start of an empty line for the summary.
TEST(ProgressLine, DrawsInPlaceAndClearsAtTheEnd) {
  std::ostringstream out;
  {
    ProgressLine progress(out, 4, false);
    IterationRecord it;
    it.start = 3 * kNsPerSecond;
    progress.on_iteration(it, {});
    Request r;
    progress.on_request(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    progress.on_run_end(RunOutcome::kDone, "");
    const std::string s = out.str();
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.front(), '\r');
    EXPECT_NE(s.find("\rsim 3.0 s | 1/4 requests"), std::string::npos) << s;
    const size_t last = s.rfind('\r', s.size() - 2);
    ASSERT_NE(last, std::string::npos);
    EXPECT_EQ(s.back(), '\r');
    EXPECT_EQ(s.substr(last + 1, s.size() - last - 2).find_first_not_of(' '), std::string::npos) << s;
  }
  const size_t drawn = out.str().size();
  EXPECT_EQ(out.str().size(), drawn);  // nothing after the end, not even from the destructor
}

// A total learnt later (a trace read beside the run) is drawn once known.
TEST(ProgressLine, ATotalKnownLaterIsDrawnOnceKnown) {
  std::ostringstream out;
  std::atomic<int64_t> known{0};
  {
    ProgressLine progress(out, 0, false, [&known] { return known.load(); });
    Request r;
    progress.on_request(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(350));
    known = 4;
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    progress.on_run_end(RunOutcome::kDone, "");
  }
  const std::string s = out.str();
  EXPECT_NE(s.find("| 1 requests"), std::string::npos) << s;
  EXPECT_NE(s.find("| 1/4 requests"), std::string::npos) << s;
}

// With no terminal (as here), `sim` draws no progress line: stderr has only the summary.
TEST(ProgressLine, NothingIsDrawnWhenNotWatched) {
  std::ostringstream out;
  { ProgressLine progress(out, 1, false); }  // ended at once: nothing drawn, nothing to clear
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace servesim
