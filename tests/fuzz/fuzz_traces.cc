// Fuzz target: every trace reader (Azure, Vidur, Mooncake JSONL, named-column CSV) on the same
// bytes: each returns rows that satisfy check_specs (arrivals relative to the first row), or an
// error; and the replay (sorted, shifted to 0, rescaled) has arrivals in [0, the horizon].
#include "tests/fuzz/fuzz_util.h"
#include "workloads/azure_trace.h"
#include "workloads/csv_trace.h"
#include "workloads/mooncake_trace.h"
#include "workloads/replay.h"
#include "workloads/vidur_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servesim;
  ReplayOptions o;
  o.path = fuzz::scratch_file(data, size, "trace");
  o.limit = 1000;
  for (auto* read : {&read_azure_trace, &read_vidur_trace, &read_mooncake_trace, &read_csv_trace}) {
    Result<std::vector<RequestSpec>> rows = read(o);
    if (rows.ok()) {
      fuzz::check_specs(rows.value(), /*relative_arrivals=*/true);
    } else {
      fuzz::require(!rows.error().message.empty());
    }
  }
  Result<Workload> w = replay_trace(o);  // detection, sorting and rescaling
  if (w.ok()) fuzz::check_specs(w.value().requests);
  return 0;
}
