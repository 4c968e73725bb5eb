// Reader of the Mooncake traces (kvcache-ai/Mooncake, FAST'25 release): JSON lines, one request each.
//
// Each line is an object with `timestamp` (ms from the start of the trace, a number >= 0),
// `input_length` and `output_length` (integers >= 1), and `hash_ids`: one id per block of
// options.block_tokens prompt tokens (512 in the released traces), the last block possibly partial.
// Equal ids mean equal block content (and, ids being assigned in prefix order, equal prefixes), so
// the prompt becomes one Segment per id: {content_id(kTraceBlockContent, id), tokens of that block},
// which is what drives prefix-cache hits in the simulator. Other keys are ignored.
//
// The number of ids must be ceil(input_length / block_tokens): every line of the released
// conversation trace satisfies it, so a line that does not is an error (its block size is likely
// not block_tokens) rather than something to guess around.
#pragma once

#include <vector>

#include "sim/request.h"
#include "sim/result.h"
#include "workloads/replay.h"

namespace servesim {

// Reads the rows of the Mooncake trace options.path, in file order, at most options.limit of them
// (0: all): id "r<index>", line, arrival (ns, not yet shifted), prompt and output tokens and the
// prompt's segments. REQUIRES: options.block_tokens >= 1. Errors (one line): "PATH: cannot open
// file", "PATH:LINE: malformed JSON: ...", "PATH:LINE: missing key 'K'", "PATH:LINE: K: expected ...",
// "PATH: empty trace (no rows)". Blank lines are skipped.
Result<std::vector<RequestSpec>> read_mooncake_trace(const ReplayOptions& options);

}  // namespace servesim
