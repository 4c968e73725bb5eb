#include "backends/roofline_backend.h"

#include <cassert>
#include <utility>

#include "backends/pipeline.h"
#include "backends/specs.h"
#include "sim/config/presets.h"

namespace servesim {

RooflineBackend::RooflineBackend(RooflineModel model, MemoryPlan memory, EngineProfile engine,
                                 std::vector<int32_t> capture_sizes)
    : model_(std::move(model)), memory_(memory), engine_(std::move(engine)), capture_sizes_(std::move(capture_sizes)) {}

double RooflineBackend::rest_seconds(int64_t tokens, int64_t seqs, int64_t emitting, bool uniform_decode) {
  const LaunchShape launch = launch_shape(capture_sizes_, tokens, uniform_decode);
  if (rests_.empty()) rests_.resize(kRests);
  Rest& kept = rests_[static_cast<size_t>(launch.padded_tokens * 131 + emitting) % kRests];
  if (kept.tokens != launch.padded_tokens || kept.emitting != emitting) {
    kept = {launch.padded_tokens, emitting,
            model_.price_rest(RooflineBreakdown{}, static_cast<double>(launch.padded_tokens),
                              static_cast<double>(emitting))};
  }
  return kept.time.total() + host_time(engine_, launch.mode, model_.model().num_layers, seqs);
}

IterationResult RooflineBackend::run(const Batch& batch) {
  if (!stages_.empty()) return run_pipeline(batch);  // roofline_stages.cc
  // One-token decodes in integer arithmetic, as a leap over a run of them (decode_run) prices them.
  DecodeDurations run;
  if (decode_run(batch, run)) return {run.at(0), run.at(0)};
  // Otherwise model_.price(batch), its part that depends on the counts alone kept.
  const RooflineModel::AttentionPart a = model_.price_attention(batch);
  const int64_t seqs = static_cast<int64_t>(batch.items.size()) + batch.group;
  const Time t = priced_duration(a.time.attention + rest_seconds(a.tokens, seqs, a.emitting, a.tokens == seqs));
  return {t, t};  // the prediction is the duration (iterations.predicted = duration)
}

bool RooflineBackend::decode_run(const Batch& batch, DecodeDurations& out) {
  if (!stages_.empty()) return false;  // a pipeline's batches are priced one by one
  RooflineModel::DecodeShape shape;
  if (!model_.decode_shape(batch, shape)) return false;
  // The rest depends on the count and the emitting decodes only: priced once per count.
  constexpr int64_t kKept = 4096;
  Time rest = 0;
  if (shape.emitting == shape.count && shape.count < kKept) {
    if (decode_rest_.size() <= static_cast<size_t>(shape.count)) decode_rest_.resize(static_cast<size_t>(shape.count) + 1, 0);
    Time& kept = decode_rest_[static_cast<size_t>(shape.count)];
    if (kept == 0) kept = priced_duration(rest_seconds(shape.count, shape.count, shape.emitting, true));
    rest = kept;
  } else {
    rest = priced_duration(rest_seconds(shape.count, shape.count, shape.emitting, true));
  }
  return model_.decode_durations(shape, rest, out);
}

int64_t RooflineBackend::kv_blocks(int32_t /*block_size*/) const { return memory_.num_blocks; }

Time RooflineBackend::request_overhead(int32_t prompt_tokens) const {
  return seconds_to_time(engine_.request + engine_.request_per_prompt_token * static_cast<double>(prompt_tokens));
}

KvGroups RooflineBackend::kv_groups() const { return scheduler_groups(memory_.layout, prefix_caching_); }

namespace {

// The setup's engine profile: its file, the default preset, or none; async scheduling as the setup
// says.
Result<EngineProfile> load_engine(const BackendSetup& setup) {
  if (setup.engine == "none") return EngineProfile::none();
  Result<std::string> path = resolve_preset(setup.engine.empty() ? kDefaultEngine : setup.engine,
                                            PresetKind::kEngine, "--engine");
  if (!path.ok()) return path.error();
  Result<EngineProfile> engine = load_engine_profile(path.value());
  if (engine.ok() && setup.async_scheduling >= 0) engine.value().async_scheduling = setup.async_scheduling == 1;
  return engine;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_roofline_backend(const BackendSetup& setup) {
  Result<Specs> specs = load_specs(setup, kDefaultHardware, kDefaultModel);
  if (!specs.ok()) return specs.error();
  HardwareSpec& hw = specs.value().hardware;
  ModelSpec& model = specs.value().model;

  RooflineOptions ro;
  ro.tp = setup.tp;
  ro.weights = model.dtype;
  ro.format = model.quantization;
  ro.routing_skew = setup.moe_routing_skew;
  if (!setup.dtype.empty()) {
    Result<DType> d = parse_dtype(setup.dtype);
    if (!d.ok()) return Error{"dtype: " + d.error().message};
    // 16- or 32-bit: every weight in it; 8 bits and fewer: the linear layers quantized as vLLM's
    // online quantization does, the embeddings and norms at the checkpoint's dtype.
    ro.format = weight_format_of(d.value());
    if (ro.format.method.empty()) ro.weights = d.value();
  }
  if (dtype_bytes(ro.weights) < 2) ro.weights = DType::kBf16;
  if (ro.weights == DType::kBf16 && !hw.bf16) ro.weights = DType::kFp16;  // T4: no BF16
  ro.activations = ro.weights == DType::kFp32 ? DType::kFp32
                   : ro.weights == DType::kBf16 ? DType::kBf16 : DType::kFp16;
  ro.kv = ro.activations;
  if (!setup.kv_dtype.empty()) {
    Result<DType> d = parse_dtype(setup.kv_dtype);
    if (!d.ok()) return Error{"kv.dtype: " + d.error().message};
    ro.kv = d.value();
  }
  if (setup.pp > 1) {
    if (Status s = check_pipeline_parallel(model.name, model.num_layers, setup.pp); !s.ok()) return s.error();
  }
  if (setup.expert_parallel && !model.is_moe()) {
    return Error{"enable_expert_parallel: " + model.name + " has no experts to split"};
  }
  if (model.is_moe()) {  // a dense model's data-parallel ranks are independent replicas
    ro.dp = setup.dp;
    ro.expert_parallel = setup.expert_parallel;
  }
  MemoryOptions mo = memory_options(setup, ro.weights, ro.kv);
  mo.pp = setup.pp;
  if (model.is_moe()) mo.moe_world = setup.tp * setup.dp;
  mo.format = ro.format;
  mo.single_group = setup.prefix_caching;
  mo.prefix_caching = setup.prefix_caching;
  Result<MemoryPlan> memory = plan_memory(hw, model, mo);
  if (!memory.ok()) return memory.error();
  Result<EngineProfile> engine = load_engine(setup);
  if (!engine.ok()) return engine.error();
  std::vector<int32_t> sizes;
  if (!setup.enforce_eager) {
    sizes = cudagraph_capture_sizes(engine.value().max_cudagraph_capture_size, setup.max_num_seqs,
                                    setup.max_num_batched_tokens);
  }
  std::vector<RooflineModel> stages = pipeline_stage_models(hw, model, ro, setup.pp);  // roofline_stages.cc
  auto backend = std::make_unique<RooflineBackend>(RooflineModel(std::move(hw), std::move(model), ro), memory.value(),
                                                   std::move(engine.value()), std::move(sizes));
  backend->set_pipeline(std::move(stages));
  backend->set_prefix_caching(setup.prefix_caching);
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace servesim
