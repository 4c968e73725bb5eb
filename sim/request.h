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

// Prompt identity, for prefix caching. A prompt is a list of segments; a segment is the first
// `tokens` tokens of a piece of content named `id` (a system prompt, a few-shot block, one turn of a
// conversation, one 512-token block of a Mooncake trace). Two prompts that start with the same
// segments start with the same tokens, so their leading KV blocks are the same. Content ids of
// different kinds come from different salted hashes (content_id) and do not collide.
struct Segment {
  uint64_t id = 0;
  int32_t tokens = 0;
};

// A content id: the hash of a kind (a fixed salt per kind of content) and a number within it.
uint64_t content_id(uint64_t salt, uint64_t n);

// Salts of the kinds of content. The simulator numbers kUniqueContent and kOutputContent by request
// index for requests whose prompt is empty or whose output_id is 0; the workload loader uses the
// other kinds, numbered as it likes, so the two never meet.
inline constexpr uint64_t kUniqueContent = 0x756e697175652121;      // sim: a request's own prompt
inline constexpr uint64_t kOutputContent = 0x6f75747075742121;      // sim: a request's output
inline constexpr uint64_t kUserContent = 0x7573657274787421;        // loader: new user tokens
inline constexpr uint64_t kTurnOutputContent = 0x7475726e6f757421;  // loader: a turn's output
inline constexpr uint64_t kPrefixContent = 0x7072656669782121;      // loader: shared prefixes
inline constexpr uint64_t kTraceBlockContent = 0x7472616365212121;  // loader: a trace's hash ids

// The most tokens a prompt, an output, a max_tokens limit or a model's context may have: 100
// million, ten times the longest context a model offers today. Every reader refuses more, so that a
// sequence's prompt and output together (at most 2 x 10^8) always fit an int32_t.
inline constexpr int32_t kMaxTokens = 100'000'000;

// The id of a request that a workload gives none: "r" and its index in the workload ("r0", "r1",
// ...).
std::string default_request_id(int64_t index);

// One request of a workload, as read or generated. Immutable once the workload is loaded.
struct RequestSpec {
  std::string id;          // unique within the workload
  Time arrival = 0;        // ns from the start of the workload; ignored when `after` is not empty
  int32_t prompt_tokens = 1;
  int32_t output_tokens = 1;  // ground truth: how many tokens the response really has (>= 1)
  int32_t max_tokens = 0;     // the caller's limit; 0 = not given (the run's default applies)
  int32_t priority = 0;       // scheduling priority, lower first (vLLM's); used by priority scheduling
  int32_t line = 0;           // source line in the workload file, 0 if generated (for messages)
  // The prompt's content, segment by segment; the segments' tokens add up to prompt_tokens. Empty:
  // the prompt is this request's own and shares nothing.
  std::vector<Segment> prompt{};
  // Content id of the tokens this request generates (so that a later turn whose prompt repeats
  // them can hit the cache). 0: derived from the request's position, unique.
  uint64_t output_id = 0;
  // Dependencies: indices (into Workload::requests) of the requests that must finish first. The
  // request arrives when the last of them finishes, plus think_time. Empty: it arrives at `arrival`.
  std::vector<int32_t> after{};
  Time think_time = 0;
};

// Why a request was rejected, by kind (the exact reason is text in Request::reason).
enum class RejectCause : uint8_t {
  kNone,
  kContextLength,   // its prompt reaches the model's context length
  kKvCapacity,      // it needs more KV blocks than the replica has
  kBatchTokens,     // its prompt exceeds the tokens one iteration may compute (no chunking)
  kParentRejected,  // a request it follows was rejected
};
inline constexpr int kNumRejectCauses = 5;

// "context_length", "kv_capacity", "batch_tokens", "parent" ("" for kNone): the suffix of
// the rejected_* metrics.
const char* reject_cause_name(RejectCause cause);

enum class RequestStatus : uint8_t {
  kPending,   // not arrived yet
  kWaiting,   // in a replica's queue (new, or preempted)
  kRunning,   // admitted: holds KV blocks and is scheduled every iteration
  kTransferring,  // disaggregated: prefilled, its first token out; its KV waits for, or moves
                  // to, a decode replica
  kDone,      // all output generated; its response may still be held back (see Request::held)
  kRejected,  // can never be served (reason in Request::reason)
};

// A run of a sequence's registered blocks whose contents lie side by side in the KV block
// manager's prefix cache (sim/prefix_tree.h): slots slot.. slot + count - 1 of chunk `chunk`.
// `hold`: blocks the sequence registered as new contents, held together as the chunk's hold; else
// cached blocks it claimed, or copies it registered, held one by one.
struct BlockRun {
  int32_t chunk = -1;
  int32_t slot = 0;
  int32_t count = 0;
  bool hold = false;
};

// What a scheduler knows about a request.
struct Sequence {
  // The prompt's content and the id of the generated tokens' content (see Segment); the KV block
  // manager hashes blocks from them.
  const Segment* prompt_segments = nullptr;
  int32_t num_prompt_segments = 0;
  uint64_t output_id = 0;
  std::vector<uint64_t> block_hashes;  // hashes of the sequence's full blocks, computed on demand
  int32_t num_registered_blocks = 0;   // leading blocks registered in, or claimed from, the cache

  int32_t index = 0;           // position in the run's request table
  int32_t prompt_tokens = 0;
  int32_t max_tokens = 0;      // effective limit on output tokens
  int32_t priority = 0;        // lower is served first under priority scheduling (vLLM's)
  int32_t num_computed = 0;    // tokens whose KV is in the cache (reset to 0 by preemption)
  int32_t num_output = 0;      // output tokens generated so far
  int32_t preemptions = 0;
  int32_t cached_tokens = 0;   // prompt tokens served from the prefix cache
  Time arrival = 0;
  RequestStatus status = RequestStatus::kPending;
  std::vector<int32_t> block_table;  // KV blocks held, in token order (owned by the BlockManager)
  std::vector<BlockRun> block_runs;  // with prefix caching, the registered ones' (BlockManager's)
  // Hybrid KV layouts (BlockManager's KvGroups): the length of the request's block table in each
  // windowed group (sliding or chunked), and how many of its leading entries are null (blocks
  // freed as they left the window).
  int32_t window_blocks = 0;
  int32_t window_nulls = 0;
  // A member of its replica's decode group (sim/replica.h) has its ticket there (0: none); its
  // num_computed, num_output and last_token are those of when the group had run `group_synced`
  // iterations, and lag the group's by the iterations it ran since.
  uint64_t group_ticket = 0;
  int64_t group_synced = 0;
  int64_t group_heaped = -1;  // the step of its latest entry in the group's heap of finishes (-1: none)

  // Tokens the sequence consists of now: the prompt and the output so far.
  int32_t num_tokens() const { return prompt_tokens + num_output; }
  // Tokens still to be computed before the next output token can be produced.
  int32_t num_uncomputed() const { return num_tokens() - num_computed; }
};

// The simulator's full record of a request.
struct Request : Sequence {
  const RequestSpec* spec = nullptr;
  Segment own_prompt;          // the prompt's content when the spec gives none: unique to it
  int32_t output_tokens = 0;   // tokens that will be generated: min(spec->output_tokens, max_tokens)
  bool capped = false;         // spec->output_tokens exceeded max_tokens (finish reason "length")
  bool held = false;           // response released by the policy, not at the last token
  int16_t replica = -1;        // where it was sent (disaggregated: its prefill replica)
  int16_t decode_replica = -1; // disaggregated: where it decodes; -1 until routed there
  int32_t slot = 0;            // where the simulator keeps it (its index, unless streamed)
  Time due = -1;               // when the client meant to send it (its arrival, or its parents'
                               // finish plus think time); later than `arrival` when
                               // max_concurrency held it back
  Time scheduled = -1;         // start of the first iteration that included it
  Time first_token = -1;
  Time last_token = -1;
  Time finished = -1;          // response complete
  std::string reason;          // why it was rejected
  RejectCause cause = RejectCause::kNone;

  const std::string& id() const { return spec->id; }
  bool generation_done() const { return num_output >= output_tokens; }
};

}  // namespace servesim
