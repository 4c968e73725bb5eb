// Fuzz target: the reader of `vllm bench serve --save-detailed` result files (sim validate
// --vllm-result), then the workload it replays and the latency samples compared: an accepted file
// gives requests within the limits, times within the horizon, and finite samples.
#include <cmath>

#include "analysis/calibration/vllm_validate.h"
#include "tests/fuzz/fuzz_util.h"
#include "workloads/vllm_bench_result.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servesim;
  Result<VllmBenchResult> r = read_vllm_bench_result(fuzz::scratch_file(data, size, "result.json"));
  if (!r.ok()) return 0;
  const VllmBenchResult& result = r.value();
  fuzz::require(!result.requests.empty());
  for (const VllmBenchRequest& q : result.requests) {
    fuzz::require(q.ttft >= 0 && std::isfinite(q.ttft) && q.latency >= 0 && q.start_time >= 0);
    fuzz::require(q.failed() || (q.input_len >= 1 && q.output_len >= 1));
  }
  Result<Workload> w = vllm_bench_workload(result, 1);
  if (w.ok()) fuzz::check_specs(w.value().requests);
  const LatencySamples s = latency_samples(result.requests);
  for (const auto* sample : {&s.ttft, &s.tpot, &s.itl, &s.e2el}) {
    for (size_t i = 1; i < sample->size(); ++i) fuzz::require((*sample)[i - 1].value < (*sample)[i].value);
  }
  return 0;
}
