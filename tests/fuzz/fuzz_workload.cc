// Fuzz target: the workload TOML reader ([[request]], [generate], [replay]) and, for small accepted
// workloads, a run of every policy over them: a run is either a clean failure or a done run whose
// every request settled, with arrival <= scheduled <= first token <= finished.
#include <string_view>

#include "backends/unit.h"
#include "policies/registry.h"
#include "sim/simulator.h"
#include "tests/fuzz/fuzz_util.h"
#include "workloads/workload.h"

namespace servesim::fuzz {
namespace {

void simulate(const std::vector<RequestSpec>& specs, size_t pick) {
  int64_t tokens = 0;
  for (const RequestSpec& r : specs) tokens += int64_t{r.prompt_tokens} + r.output_tokens;
  if (specs.size() > 200 || tokens > 20'000) return;  // keep each execution fast
  const std::vector<PolicyInfo>& policies = policy_registry();
  const PolicyInfo& info = policies[pick % policies.size()];
  SimOptions o;
  o.limits = {8, 256};
  o.block_size = 4;
  o.kv_blocks = pick % 2 == 0 ? -1 : 64;
  o.prefix_caching = info.prefix_caching;
  std::vector<std::unique_ptr<Policy>> p;
  p.push_back(std::move(info.make(toml::table{}).value()));
  std::vector<std::unique_ptr<Backend>> b;
  b.push_back(std::make_unique<UnitBackend>());
  Simulator sim(specs, o, std::move(p), std::move(b), {});
  const RunResult result = sim.run();
  if (result.outcome != RunOutcome::kDone) {
    require(result.bad_input);  // a horizon failure: anything else is a bug
    return;
  }
  for (const Request& r : sim.requests()) {
    if (r.status == RequestStatus::kRejected) continue;
    require(r.status == RequestStatus::kDone);
    require(r.arrival >= 0 && r.arrival <= r.scheduled && r.scheduled < r.first_token &&
            r.first_token <= r.finished && r.finished <= kTimeHorizon);
  }
}

}  // namespace
}  // namespace servesim::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace servesim;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<Workload> w = parse_workload(text, "fuzz.toml", std::nullopt);
  if (!w.ok()) {
    fuzz::require(!w.error().message.empty());
    return 0;
  }
  fuzz::check_specs(w.value().requests);
  fuzz::simulate(w.value().requests, size);
  return 0;
}
