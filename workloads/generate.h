// [generate] tables: requests drawn at random (the keys are in workload.h). Arrivals, prompt and
// output lengths, prefixes, priorities, turn counts and think times each draw from their own
// stream of the seed, so a request's draws do not depend on how many came before it was asked for:
// the whole workload and the stream give the same requests.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <toml++/toml.h>

#include "sim/request_stream.h"
#include "sim/result.h"
#include "workloads/load_controls.h"
#include "workloads/workload.h"

namespace servesim {

// The requests of a [generate] table, under the load controls that apply while drawing them
// (num_prompts, request_rate, burstiness), conversations included. Errors name the key.
Result<Workload> generate_workload(const toml::table& table, const std::string& path,
                                   std::optional<uint64_t> seed_override, const LoadControls& load);

// The same requests drawn one at a time, for a table without sessions; sets *seed to the seed used.
// nullptr with sessions, or when a prefix could push a prompt past kMaxTokens (generate_workload
// reports it when it happens). Errors in the table are generate_workload's.
Result<std::unique_ptr<RequestStream>> generated_stream(const toml::table& table, const std::string& path,
                                                       std::optional<uint64_t> seed_override,
                                                       const LoadControls& load, uint64_t* seed);

}  // namespace servesim
