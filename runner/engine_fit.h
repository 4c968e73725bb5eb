// Fitting an engine file's host terms (backends/engine_profile.h) to end-to-end measurements:
// `vllm bench serve --save-result --save-detailed` files, each replayed through the simulator as
// `sim validate --vllm-result` replays it. Two terms, two numbers per file: the host time per
// iteration (step_us), found by bisection so that the replays' mean inter-token latency is the
// measured one (it grows with step_us; the API server's time leaves it alone), and the API
// server's time per request (request_us), which adds to every TTFT and so is solved in closed form
// from the mean TTFT; twice over, as each moves the other a little. The fit uses the requests at
// even positions in each file; those at odd positions are held out and their errors reported. A
// bootstrap over the fitting requests (each resample refitted) gives each value its 95 % range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/engine_profile.h"
#include "sim/config/config.h"
#include "sim/result.h"
#include "workloads/vllm_bench_result.h"
#include "workloads/workload.h"

namespace servesim {

// One measured benchmark and its replay: the configuration (its engine.profile is replaced at every
// evaluation) and the requests built from the file.
struct EngineFitSource {
  std::string path;
  VllmBenchResult measured;
  RunConfig config;
  Workload workload;
};

struct EngineFitOptions {
  int bootstrap = 20;   // resamples for the ranges (0: none)
  uint64_t seed = 1;
  std::string work_dir; // where the trial engine files go (must exist)
};

struct EngineFitKey {
  std::string name;     // the file's key: step_us, request_us
  double start = 0, value = 0, low = 0, high = 0;  // microseconds; the 95 % range
  bool at_bound = false;
};

// Mean TTFT and mean inter-token latency of one half of a file's successful requests (seconds).
struct EngineFitError {
  std::string file;
  double ttft_measured = 0, ttft_simulated = 0, itl_measured = 0, itl_simulated = 0;
  double ttft_error() const { return (ttft_simulated - ttft_measured) / ttft_measured; }
  double itl_error() const { return (itl_simulated - itl_measured) / itl_measured; }
};

struct EngineFit {
  EngineProfile fitted;
  std::vector<EngineFitKey> keys;
  std::vector<EngineFitError> held_out_start, held_out;  // per file, before and after
  int evaluations = 0;
  std::string result;  // how the values were found
};

// Fits `start`'s host terms to the sources. Errors: a replay that fails, no successful request in a
// half of a file, a measured mean of 0.
Result<EngineFit> fit_engine(const EngineProfile& start, const std::vector<EngineFitSource>& sources,
                             const EngineFitOptions& options);

// The engine file for `fit`: `start_text` (the starting file's text) with the fitted keys' values
// replaced (or added), and a header saying what they were fitted to.
std::string engine_file_text(const std::string& start_text, const EngineFit& fit);

}  // namespace servesim
