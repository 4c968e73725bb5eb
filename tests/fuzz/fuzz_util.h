// Shared by the fuzz targets (libFuzzer, clang): a scratch file to hand readers that take a path,
// and the properties every reader's output must have. A broken property traps, which libFuzzer
// reports as a finding with the input that caused it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sim/request.h"
#include "sim/time.h"

namespace servesim::fuzz {

// Writes the input to a scratch file (named `name`, in $TMPDIR or /tmp, one per process) and
// returns its path.
inline std::string scratch_file(const uint8_t* data, size_t size, const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/servesim-fuzz-" +
                           std::to_string(getpid()) + "-" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// Traps unless `ok`: a property every accepted input must have.
inline void require(bool ok) {
  if (!ok) __builtin_trap();
}

// What every workload the readers accept must satisfy: lengths within kMaxTokens, times within
// the horizon, prompt segments that add up to the prompt, dependencies that point at earlier rows.
// A trace reader's rows before replay shifts them may arrive before the first row
// (`relative_arrivals`): within the horizon either way.
inline void check_specs(const std::vector<RequestSpec>& specs, bool relative_arrivals = false) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const RequestSpec& r = specs[i];
    require(!r.id.empty());
    require(r.prompt_tokens >= 1 && r.prompt_tokens <= kMaxTokens);
    require(r.output_tokens >= 1 && r.output_tokens <= kMaxTokens);
    require(r.max_tokens >= 0 && r.max_tokens <= kMaxTokens);
    require(r.arrival >= (relative_arrivals ? -kTimeHorizon : 0) && r.arrival <= kTimeHorizon);
    require(r.think_time >= 0 && r.think_time <= kTimeHorizon);
    if (!r.prompt.empty()) {
      int64_t sum = 0;
      for (const Segment& s : r.prompt) {
        require(s.tokens >= 1);
        sum += s.tokens;
      }
      require(sum == r.prompt_tokens);
    }
    for (int32_t p : r.after) require(p >= 0 && static_cast<size_t>(p) < i);
  }
}

}  // namespace servesim::fuzz
