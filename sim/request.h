// A request as the workload describes it (RequestSpec), and as the simulator tracks it (Request).
//
// Sequence is the part of a request that a scheduling policy may see: what a real scheduler knows.
// The true output length lives only in Request, which derives from Sequence; policies are handed
// Sequence pointers and must not cast them back (an oracle policy would have to say so in its name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/time.h"

namespace servesim {

// One request of a workload, as read or generated. Immutable once the workload is loaded.
struct RequestSpec {
  std::string id;          // unique within the workload
  Time arrival = 0;        // ns from the start of the workload
  int32_t prompt_tokens = 1;
  int32_t output_tokens = 1;  // ground truth: how many tokens the response really has (>= 1)
  int32_t max_tokens = 0;     // the caller's limit; 0 = not given (the run's default applies)
  int32_t line = 0;           // source line in the workload file, 0 if generated (for messages)
};

enum class RequestStatus : uint8_t {
  kPending,   // not arrived yet
  kWaiting,   // in a replica's queue (new, or preempted)
  kRunning,   // admitted: holds KV blocks and is scheduled every iteration
  kDone,      // all output generated; its response may still be held back (see Request::held)
  kRejected,  // can never be served (reason in Request::reason)
};

// What a scheduler knows about a request.
struct Sequence {
  int32_t index = 0;           // position in the run's request table
  int32_t prompt_tokens = 0;
  int32_t max_tokens = 0;      // effective limit on output tokens
  int32_t num_computed = 0;    // tokens whose KV is in the cache (reset to 0 by preemption)
  int32_t num_output = 0;      // output tokens generated so far
  int32_t preemptions = 0;
  int32_t cached_tokens = 0;   // prompt tokens served from the prefix cache
  Time arrival = 0;
  RequestStatus status = RequestStatus::kPending;
  std::vector<int32_t> block_table;  // KV blocks held, in token order (owned by the BlockManager)

  // Tokens the sequence consists of now: the prompt and the output so far.
  int32_t num_tokens() const { return prompt_tokens + num_output; }
  // Tokens still to be computed before the next output token can be produced.
  int32_t num_uncomputed() const { return num_tokens() - num_computed; }
};

// The simulator's full record of a request.
struct Request : Sequence {
  const RequestSpec* spec = nullptr;
  int32_t output_tokens = 0;   // tokens that will be generated: min(spec->output_tokens, max_tokens)
  bool capped = false;         // spec->output_tokens exceeded max_tokens (finish reason "length")
  bool held = false;           // response released by the policy, not at the last token
  int16_t replica = -1;
  Time scheduled = -1;         // start of the first iteration that included it
  Time first_token = -1;
  Time last_token = -1;
  Time finished = -1;          // response complete
  std::string reason;          // why it was rejected

  const std::string& id() const { return spec->id; }
  bool generation_done() const { return num_output >= output_tokens; }
};

}  // namespace servesim
