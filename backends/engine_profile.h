// A serving engine as a cost model sees it beside the GPU's kernels: what the host spends per
// iteration (scheduling, input preparation, sampling, output processing; what async scheduling
// overlaps with the GPU and what it does not), how the forward pass is launched (CUDA graphs at
// capture sizes, padded up to them; piecewise graphs for mixed batches; eager kernel launches above
// the largest size), and what one request pays outside the engine core (the API server:
// tokenization, detokenization, the first response). Read from data/engines/*.toml, where each
// value carries its unit in its key and its source in a comment. Immutable once loaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/result.h"

namespace servesim {

struct EngineProfile {
  std::string name;     // e.g. "vLLM 0.33.0 (V1 engine)"
  std::string path;     // the file it came from; "" for none()
  std::string engine;   // "vllm", "trtllm", ...
  std::string version;  // the release the values describe
  // Whether the scheduler prepares iteration n + 1 while the GPU runs iteration n (vLLM V1's
  // async scheduling, its default since 0.11 where nothing rules it out).
  bool async_scheduling = true;
  // CUDA graphs: the largest capture size in tokens (vLLM: min(2 x max_num_seqs, 512), and at most
  // max_num_batched_tokens); 0 = none (eager, as --enforce-eager).
  int32_t max_cudagraph_capture_size = 512;
  // Seconds. A uniform decode batch replays one full graph; a mixed batch replays one piecewise
  // graph per layer with its attention launched eagerly between them; an eager forward launches
  // every kernel of every layer.
  double graph_launch = 0;
  double piecewise_layer = 0;
  double eager_layer = 0;
  // Host time per iteration that the GPU waits for (s): always, and per scheduled request.
  double step = 0;
  double step_per_seq = 0;
  // What async scheduling hides, paid when it is off: scheduling and input preparation (s).
  double sync_step = 0;
  double sync_step_per_seq = 0;
  // One request outside the engine core (s): the API server's tokenization, its hand-off to the
  // engine and the response's return, fixed and per prompt token. Added to the request's first
  // token and completion as its client sees them; never to its scheduling.
  double request = 0;
  double request_per_prompt_token = 0;

  // No host costs at all: every iteration costs its kernels alone (the model of servesim before
  // engine profiles, and of `--engine none`).
  static EngineProfile none();
};

// Reads an engine TOML file. Errors name the file, line and key.
Result<EngineProfile> load_engine_profile(const std::string& path);

// The preset used when a run names none.
inline constexpr const char* kDefaultEngine = "vllm-0.33";

// vLLM 0.33's CUDA-graph capture sizes (config/vllm.py, _set_cudagraph_sizes): [1, 2, 4], every 8
// below 256, every 16 from 256, up to the largest size min(max_capture, 2 x max_num_seqs,
// max_num_batched_tokens), and max_num_seqs when it is within it (the widest uniform decode).
// Empty when max_capture is 0.
std::vector<int32_t> cudagraph_capture_sizes(int32_t max_capture, int32_t max_num_seqs,
                                             int32_t max_num_batched_tokens);

// How one iteration's forward pass is launched, and the tokens its GEMMs compute (padded up to the
// capture size of its graph).
enum class GraphMode { kFull, kPiecewise, kEager };
struct LaunchShape {
  GraphMode mode = GraphMode::kEager;
  int64_t padded_tokens = 0;
};
// A batch of `tokens` tokens, `uniform_decode` when every sequence computes one token, under
// `sizes` (ascending).
LaunchShape launch_shape(const std::vector<int32_t>& sizes, int64_t tokens, bool uniform_decode);

// The host's part of one iteration (s) of `seqs` sequences launched as `mode`, `layers` layers deep.
double host_time(const EngineProfile& e, GraphMode mode, int64_t layers, int64_t seqs);

}  // namespace servesim
