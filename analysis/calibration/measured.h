// Measured GPU timings as batches the roofline can price: the input of `sim validate --measured` and
// of calibration. Two sources, each read into MeasuredBatch values (a calibrate.h Measurement, the
// batch as roofline items and its measured seconds, plus what kind of batch it is, what part of an
// iteration the time covers, and a label for reports):
//
// 1. Vidur's operator profiles (github.com/microsoft/vidur, data/profiling/compute/<gpu>/<model>/),
//    read as they are, summed per iteration as Vidur's ExecutionTime.model_time sums them: per layer
//    attn_pre_proj (QKV) + attn_post_proj (O) + attn_rope + mlp_up_proj (gate and up, one fused
//    GEMM) + mlp_act + mlp_down_proj + input_layernorm + post_attention_layernorm + add (Vidur times
//    one residual add per layer) + the attention, times the model's layers; no embedding, no LM
//    head, no CPU overhead. Medians (Vidur fits its predictors to them), in ms per layer. From
//    mlp.csv and attention_rows.csv (optional):
//      decode   batch_size items of 1 new token over kv_cache_size cached tokens each: the attention
//               row plus the linear layers at num_tokens = batch_size;
//      prefill  one item of prefill_chunk_size new tokens over kv_cache_size cached: the attention
//               row plus the linear layers at num_tokens = prefill_chunk_size;
//      linear-only (every mlp.csv row, with or without attention rows): the linear layers, norms,
//               RoPE, activation and add at num_tokens, priced as one item of num_tokens new tokens.
//    Shapes whose token count mlp.csv did not profile are skipped, not interpolated (Vidur itself
//    would look its linear layers up at the count rounded up to a multiple of 8): every measurement
//    is a real timing of the shape it prices. Rows profiled twice (mlp.csv has 2,048 and 4,096
//    tokens twice, attention_rows.csv some prefills at 1,024 cached twice) count once, at the mean
//    of their medians. Attention was profiled at tp 1 only; with tp > 1 only mlp.csv's rows of that
//    tensor-parallel degree are read (per-GPU times; the all-reduce, which Vidur adds from its
//    network profiles, is not in them). Vidur's attn_kv_cache_save (the new K and V written to the
//    cache) is not among the attention rows we have, so the measured attention leaves it out.
//
// 2. A CSV of our own, which any engine's logs can be turned into. Long format, one row per batch
//    item of an iteration; `#` starts a comment line; blank lines are skipped; extra columns are
//    ignored, in any order:
//        # vLLM 0.6, Llama-2-7B, one A100-80GB, CUDA graphs off
//        iteration,new_tokens,context_tokens,measured_ms
//        0,512,0,41.2          <- iteration 0: one prefill of 512 tokens, 41.2 ms
//        1,1,512,11.9          <- iteration 1: two decodes ...
//        1,1,300,              <- ... the time on the first row only (or repeated, the same value)
//    iteration       integer >= 0; an iteration's rows are together, and iterations are numbered one
//                    after another (the file may start at any number): a gap means rows were lost
//    new_tokens      tokens this item computes in the iteration, >= 1 (1 for a decode)
//    context_tokens  tokens already in its KV cache, >= 0
//    measured_ms     the whole iteration's wall time in milliseconds, > 0: given on the iteration's
//                    first row; later rows leave it empty or repeat the same value
//    The time covers the whole forward pass (Coverage::kIteration). Every item is priced as sampling
//    a token: vLLM V1 computes logits for every scheduled sequence, partial prefills included.
//    Kind: decode when every item is 1 new token over a non-empty cache, prefill when none is,
//    mixed otherwise. Errors name PATH:LINE:FIELD (FIELD the column's 1-based position) and the
//    column: `m.csv:7:4: measured_ms: expected a number of milliseconds > 0, got '-3'`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/calibration/calibrate.h"
#include "backends/model.h"
#include "backends/roofline.h"
#include "sim/result.h"

namespace servesim {

enum class MeasuredKind { kPrefill, kDecode, kMixed, kLinearOnly };
// "prefill" | "decode" | "mixed" | "linear-only".
const char* measured_kind_name(MeasuredKind kind);

// The part of an iteration a measured time covers, and so the part of the roofline's price that is
// compared with it (comparable_price).
// "iteration" | "layers" | "linear layers".
const char* coverage_name(Coverage c);

struct MeasuredBatch {
  Measurement measurement;        // the batch as roofline items, and its measured seconds (> 0)
  MeasuredKind kind = MeasuredKind::kMixed;
  Coverage covers = Coverage::kIteration;
  std::string label;              // "decode batch 32 over 1024", "iteration 7 (line 12)"

  int64_t batch_size() const { return static_cast<int64_t>(measurement.items.size()); }
  int64_t new_tokens() const;     // summed over the items
};

// The roofline's time (s) for the parts of the iteration that `covers` names, for `items` priced as
// RooflineModel::price prices them: total() for kIteration; for kLayers total() minus the LM head,
// the per-iteration overhead, the embedding rows' read and the tensor-parallel all-reduces (Vidur's
// layer profiles have none of these); for kLinearLayers also minus the attention. The attention's
// time is compared as a whole or not at all, never in part. REQUIRES: !items.empty().
double comparable_price(const RooflineModel& roofline, const std::vector<RooflineModel::Item>& items,
                        Coverage covers);
double comparable_price(const RooflineModel& roofline, const MeasuredBatch& batch);

// The embedding's share of RooflineBreakdown::other for `tokens` new tokens: one row of the table
// read and one activation written per token, at the roofline's memory efficiency (roofline.cc,
// price_rest). Comparable prices subtract it.
double embedding_time(const RooflineModel& roofline, double tokens);

// The measured batches at `path`: a Vidur profile folder (read_vidur_profile, its notes appended
// to *notes) or a CSV of ours (read_measured_csv). Each batch's measurement carries its coverage.
Result<std::vector<MeasuredBatch>> read_measured_path(const std::string& path, const ModelSpec& model,
                                                      int32_t tp, std::vector<std::string>* notes);

// Reads a CSV of our own (format above). Errors: the file's (missing, unreadable), a missing column
// (`PATH:LINE: missing column 'measured_ms' (found: ...)`), a bad cell, an iteration's first row
// without a time or a later row with a different one, an iteration with no rows (a gap in the
// numbering), rows of an iteration apart, no data rows.
Result<std::vector<MeasuredBatch>> read_measured_csv(const std::string& path);

// A Vidur profile folder, read for one model at one tensor-parallel degree.
struct VidurProfile {
  std::vector<MeasuredBatch> batches;  // decode and prefill (when it has attention rows), then linear-only
  bool has_attention = false;          // attention_rows.csv was read
  std::vector<std::string> notes;      // what was skipped or merged, for the user
};
// Reads DIR/mlp.csv and, when present and tp is 1, DIR/attention_rows.csv. The profile's shapes
// (n_head, n_kv_head, n_embd, n_expanded_embd) must be the model's (num_attention_heads,
// num_key_value_heads, hidden_size, intermediate_size); the per-layer times are multiplied by the
// model's num_hidden_layers. Errors name PATH:LINE:FIELD and the column, as above, or say which
// shapes differ, or that no row has num_tensor_parallel_workers = tp (listing those that do).
Result<VidurProfile> read_vidur_profile(const std::string& dir, const ModelSpec& model, int32_t tp);

// The shipped presets a Vidur profile folder's path implies: the GPU folder (".../compute/a100/...":
// Vidur's DGX A100 80GB and DGX H100 nodes, a100-80gb and h100-sxm) and the model folder
// ("Llama-2-7b-hf": llama-2-7b, "Meta-Llama-3-8B": llama-3-8b, "Meta-Llama-3-70B": llama-3-70b).
// Empty where the path names none we ship.
struct VidurPresets {
  std::string hardware, model;
};
VidurPresets vidur_presets(const std::string& dir);

}  // namespace servesim
