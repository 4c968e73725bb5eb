// `sim memory`: a model's KV cache as vLLM lays it out on one GPU (backends/kv_layout.h): the
// groups, the page, the blocks a memory budget holds and the requests of N tokens they hold at once.
// The budget is given (--kv-cache-memory-bytes, vLLM's name) or derived from a GPU (--hardware) as
// a run derives it.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "backends/hardware.h"
#include "backends/kv_memory.h"
#include "backends/model.h"
#include "cli/cli.h"
#include "sim/config/presets.h"

namespace servesim {
namespace {

namespace po = boost::program_options;

po::options_description memory_options() {
  po::options_description o("sim memory options");
  o.add_options()
      ("help,h", "this help")
      ("model", po::value<std::string>()->required(), "model: a preset (`sim list models`) or a config.json")
      ("hardware", po::value<std::string>(), "GPU whose memory holds weights, activations and the KV cache")
      ("kv-cache-memory-bytes", po::value<double>(), "KV cache bytes per GPU (instead of --hardware)")
      ("tp", po::value<int32_t>()->default_value(1), "tensor-parallel degree")
      ("kv-cache-dtype", po::value<std::string>()->default_value("auto"), "auto (the model's dtype), bf16, fp16 or fp8")
      ("block-size", po::value<std::string>()->default_value("auto"),
       "tokens per block: auto (16; 64 for MLA with an fp8 cache, FlashMLA's)")
      ("max-model-len", po::value<int64_t>(), "context per request (default: max_position_embeddings)")
      ("max-num-batched-tokens", po::value<int64_t>()->default_value(8192), "tokens per step")
      ("gpu-memory-utilization", po::value<double>()->default_value(0.9), "fraction of device memory vLLM takes")
      ("disable-hybrid-kv-cache-manager", po::bool_switch(), "sliding and chunked layers keep full KV (vLLM's flag)")
      ("no-prefix-caching", po::bool_switch(), "Mamba state blocks without prefix caching (one per request)")
      ("format", po::value<std::string>()->default_value("text"), "text or json");
  return o;
}

struct MemoryArgs {
  ModelSpec model;
  KvLayoutOptions layout;
  double available = 0;
  int64_t max_model_len = 0;
  std::string hardware;
  MemoryPlan plan;
};

// The options into a layout request; errors are the user's (exit 2).
Result<MemoryArgs> read_args(const po::variables_map& vm) {
  MemoryArgs a;
  Result<std::string> path = resolve_preset(vm["model"].as<std::string>(), PresetKind::kModel, "--model");
  if (!path.ok()) return path.error();
  Result<ModelSpec> m = load_model(path.value());
  if (!m.ok()) return m.error();
  a.model = m.value();
  a.layout.tp = vm["tp"].as<int32_t>();
  if (Status s = check_tensor_parallel(a.model, a.layout.tp); !s.ok()) return s.error();
  const std::string kv = vm["kv-cache-dtype"].as<std::string>();
  // auto: the model's dtype, as vLLM serves it (a float32 checkpoint in bfloat16).
  a.layout.kv = a.model.dtype == DType::kFp32 ? DType::kBf16 : a.model.dtype;
  if (kv != "auto") {
    Result<DType> d = parse_dtype(kv);
    if (!d.ok() || dtype_bytes(d.value()) < 1) return Error{"--kv-cache-dtype: expected auto, bf16, fp16 or fp8, got " + kv};
    a.layout.kv = d.value();
  }
  const std::string bs = vm["block-size"].as<std::string>();
  if (bs == "auto") {
    a.layout.block_size = a.model.has(AttentionKind::kMla) && a.layout.kv == DType::kFp8 ? 64 : 16;
  } else {
    char* end = nullptr;
    const long v = std::strtol(bs.c_str(), &end, 10);
    if (end == bs.c_str() || *end != '\0' || v < 1 || v > 1 << 20) return Error{"--block-size: expected auto or a number of tokens from 1 to 1048576, got " + bs};
    a.layout.block_size = static_cast<int32_t>(v);
  }
  a.layout.hybrid_manager = !vm["disable-hybrid-kv-cache-manager"].as<bool>();
  a.layout.prefix_caching = !vm["no-prefix-caching"].as<bool>();
  const int64_t batched = vm["max-num-batched-tokens"].as<int64_t>();
  if (batched < 1) return Error{"--max-num-batched-tokens: expected >= 1"};
  a.layout.max_in_flight_tokens = 2 * batched;
  a.max_model_len = vm.count("max-model-len") ? vm["max-model-len"].as<int64_t>() : a.model.max_position_embeddings;
  if (a.max_model_len < 1 || a.max_model_len > a.model.max_position_embeddings)
    return Error{"--max-model-len: expected 1 to " + std::to_string(a.model.max_position_embeddings) +
                 " (the model's max_position_embeddings), got " + std::to_string(a.max_model_len)};
  return a;
}

// The KV budget: given, or what the GPU leaves after weights, activations and CUDA's own.
Status read_budget(const po::variables_map& vm, MemoryArgs& a) {
  if (vm.count("kv-cache-memory-bytes")) {
    a.available = vm["kv-cache-memory-bytes"].as<double>();
    if (!(a.available > 0) || !std::isfinite(a.available)) return Error{"--kv-cache-memory-bytes: expected > 0"};
    return Ok{};
  }
  if (!vm.count("hardware")) return Error{"give --kv-cache-memory-bytes or --hardware"};
  Result<std::string> hw_path = resolve_preset(vm["hardware"].as<std::string>(), PresetKind::kHardware, "--hardware");
  if (!hw_path.ok()) return hw_path.error();
  Result<HardwareSpec> hw = load_hardware(hw_path.value());
  if (!hw.ok()) return hw.error();
  a.hardware = hw.value().name;
  MemoryOptions mo;
  mo.tp = a.layout.tp;
  mo.weights = a.model.dtype;
  mo.format = a.model.quantization;
  mo.kv = a.layout.kv;
  mo.block_size = a.layout.block_size;
  mo.single_group = !a.layout.hybrid_manager;
  mo.gpu_memory_utilization = vm["gpu-memory-utilization"].as<double>();
  mo.max_num_batched_tokens = static_cast<int32_t>(vm["max-num-batched-tokens"].as<int64_t>());
  KvLayout layout = kv_layout(a.model, a.layout);
  mo.block_size = static_cast<int32_t>(layout.block_size);
  Result<MemoryPlan> plan = plan_memory(hw.value(), a.model, mo);
  if (!plan.ok()) return plan.error();
  a.plan = plan.value();
  a.available = a.plan.budget - a.plan.weights - a.plan.activations - a.plan.non_torch;
  return Ok{};
}

nlohmann::json to_json(const MemoryArgs& a, const KvLayout& l, int64_t blocks) {
  nlohmann::json groups = nlohmann::json::array();
  for (const KvGroup& g : l.groups) {
    groups.push_back({{"kind", attention_kind_name(g.kind)}, {"layers", g.layers}, {"block_size", l.block_size},
                      {"page_size_bytes", static_cast<int64_t>(g.page_bytes)},
                      {"sliding_window", g.kind == AttentionKind::kSlidingWindow ? nlohmann::json(g.window) : nlohmann::json()},
                      {"attention_chunk_size", g.kind == AttentionKind::kChunkedLocal ? nlohmann::json(g.window) : nlohmann::json()}});
  }
  const double conc = l.max_concurrency(blocks, a.max_model_len, a.layout.max_in_flight_tokens);
  return {{"model", a.model.name}, {"tp", a.layout.tp}, {"kv_cache_dtype", dtype_name(a.layout.kv)},
          {"block_size", l.block_size}, {"max_model_len", a.max_model_len}, {"available_bytes", a.available},
          {"groups", groups}, {"bytes_per_block", l.bytes_per_block}, {"num_blocks", blocks},
          {"max_concurrency", {{"tokens", a.max_model_len}, {"value", conc}}},
          {"kv_cache_tokens", static_cast<int64_t>(conc * static_cast<double>(a.max_model_len))}};
}

void print_text(const MemoryArgs& a, const KvLayout& l, int64_t blocks, std::ostream& out) {
  char line[256];
  out << a.model.name << " at tp " << a.layout.tp << ", KV in " << dtype_name(a.layout.kv)
      << (a.hardware.empty() ? "" : " on " + a.hardware) << "\n";
  std::snprintf(line, sizeof line, "%-16s %7s %8s %14s\n", "group", "layers", "window", "page (bytes)");
  out << line;
  for (const KvGroup& g : l.groups) {
    std::snprintf(line, sizeof line, "%-16s %7zu %8lld %14.0f\n", attention_kind_name(g.kind), g.layers.size(),
                  static_cast<long long>(g.window), g.page_bytes);
    out << line;
  }
  const double conc = l.max_concurrency(blocks, a.max_model_len, a.layout.max_in_flight_tokens);
  std::snprintf(line, sizeof line,
                "block size %lld tokens; %.0f bytes per block id; %.2f GiB for KV -> %lld blocks\n"
                "maximum concurrency for %lld tokens per request: %.2fx (%lld tokens)\n",
                static_cast<long long>(l.block_size), l.bytes_per_block, a.available / (1 << 30),
                static_cast<long long>(blocks), static_cast<long long>(a.max_model_len), conc,
                static_cast<long long>(conc * static_cast<double>(a.max_model_len)));
  out << line;
}

}  // namespace

int memory_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::variables_map vm;
  const po::options_description desc = memory_options();
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    if (vm.count("help")) {
      out << "Usage: sim memory --model M (--hardware H | --kv-cache-memory-bytes B) [options]\n\n"
             "The KV cache as vLLM 0.33 lays it out on one GPU: layers grouped by KV spec, one page\n"
             "size, the blocks the memory holds, and the requests of --max-model-len tokens they hold.\n\n"
          << desc;
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return bad_input(err, std::string("memory: ") + e.what());
  }
  Result<MemoryArgs> a = read_args(vm);
  if (!a.ok()) return bad_input(err, "memory: " + a.error().message);
  if (Status s = read_budget(vm, a.value()); !s.ok()) return bad_input(err, "memory: " + s.error().message);
  const std::string format = vm["format"].as<std::string>();
  if (format != "text" && format != "json") return bad_input(err, "memory: --format: expected text or json, got " + format);
  const KvLayout l = kv_layout(a.value().model, a.value().layout);
  const int64_t blocks = l.num_blocks(a.value().available);
  // vLLM refuses a budget that cannot hold one request of max_model_len beside the null block.
  const double need = l.bytes_per_block * static_cast<double>(l.blocks_per_request(a.value().max_model_len, a.value().layout.max_in_flight_tokens));
  if (a.value().available - l.bytes_per_block < need) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "memory: one request of max_model_len %lld tokens needs %.2f GiB of KV cache, but %.2f GiB "
                  "is available (vLLM refuses to start); lower --max-model-len or add memory",
                  static_cast<long long>(a.value().max_model_len), need / (1 << 30), a.value().available / (1 << 30));
    if (format == "json") out << nlohmann::json{{"model", a.value().model.name}, {"error", msg}}.dump() << "\n";
    return bad_input(err, msg);
  }
  if (format == "json") {
    out << to_json(a.value(), l, blocks).dump() << "\n";
  } else {
    print_text(a.value(), l, blocks, out);
  }
  return kExitOk;
}

}  // namespace servesim
