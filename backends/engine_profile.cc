#include "backends/engine_profile.h"

#include <algorithm>
#include <string_view>

#include <toml++/toml.h>

#include "sim/config/toml_fields.h"

namespace servesim {
namespace {

constexpr double kEngineUnit = 1e-6;  // us -> s

struct EngineKey {
  std::string_view key;
  double max;  // every key is in [0, max] microseconds
  double EngineProfile::*field;
};
constexpr EngineKey kEngineKeys[] = {
    {"graph_launch_us", 1e5, &EngineProfile::graph_launch},
    {"piecewise_layer_us", 1e4, &EngineProfile::piecewise_layer},
    {"eager_layer_us", 1e4, &EngineProfile::eager_layer},
    {"step_us", 1e6, &EngineProfile::step},
    {"step_per_seq_us", 1e4, &EngineProfile::step_per_seq},
    {"sync_step_us", 1e6, &EngineProfile::sync_step},
    {"sync_step_per_seq_us", 1e4, &EngineProfile::sync_step_per_seq},
    {"request_us", 1e7, &EngineProfile::request},
    {"request_per_prompt_token_us", 1e3, &EngineProfile::request_per_prompt_token},
};

}  // namespace

EngineProfile EngineProfile::none() {
  EngineProfile e;
  e.name = "none (kernels only)";
  e.engine = "none";
  e.max_cudagraph_capture_size = 0;
  return e;
}

Result<EngineProfile> load_engine_profile(const std::string& path) {
  Result<std::string> text = read_text_file(path);
  if (!text) return text.error();
  auto parsed = parse_toml(text.value(), path);
  if (!parsed) return parsed.error();
  const toml::table& root = parsed.value();
  const TableFields f(root, path, "");
  if (Status s = f.check_known({"name", "engine", "version", "async_scheduling", "max_cudagraph_capture_size",
                                "graph_launch_us", "piecewise_layer_us", "eager_layer_us", "step_us",
                                "step_per_seq_us", "sync_step_us", "sync_step_per_seq_us", "request_us",
                                "request_per_prompt_token_us"});
      !s) {
    return s.error();
  }
  EngineProfile e;
  e.path = path;
  for (std::string_view key : {"name", "engine", "version"}) {
    if (Status s = f.require(key); !s) return s.error();
    auto v = f.string(key);
    if (!v || v.value()->empty()) return f.expected(key, "a non-empty string");
    (key == "name" ? e.name : key == "engine" ? e.engine : e.version) = *v.value();
  }
  auto capture = f.integer("max_cudagraph_capture_size", 0, 1 << 20);
  if (!capture) return capture.error();
  if (capture.value()) e.max_cudagraph_capture_size = static_cast<int32_t>(*capture.value());
  for (const EngineKey& n : kEngineKeys) {
    auto v = f.number(n.key, 0, true, n.max);
    if (!v) return v.error();
    if (v.value()) e.*(n.field) = *v.value() * kEngineUnit;
  }
  if (const toml::node* async = root.get("async_scheduling")) {
    const auto* b = async->as_boolean();
    if (b == nullptr) return f.expected("async_scheduling", "true or false");
    e.async_scheduling = b->get();
  }
  return e;
}

std::vector<int32_t> cudagraph_capture_sizes(int32_t max_capture, int32_t max_num_seqs,
                                             int32_t max_num_batched_tokens) {
  if (max_capture <= 0) return {};
  // One token per decoding request: vLLM covers twice the widest decode, within the platform's cap.
  int64_t largest = std::min<int64_t>(max_capture, 2 * static_cast<int64_t>(max_num_seqs));
  const bool widest_decode = max_num_seqs <= largest;
  largest = std::min<int64_t>(largest, max_num_batched_tokens);
  std::vector<int32_t> sizes;
  for (int32_t s : {1, 2, 4}) {
    if (s <= largest) sizes.push_back(s);
  }
  for (int64_t s = 8; s < std::min<int64_t>(largest + 1, 256); s += 8) sizes.push_back(static_cast<int32_t>(s));
  for (int64_t s = 256; s <= largest; s += 16) sizes.push_back(static_cast<int32_t>(s));
  if (max_num_batched_tokens <= largest) sizes.push_back(max_num_batched_tokens);
  if (widest_decode && max_num_seqs <= max_num_batched_tokens) sizes.push_back(max_num_seqs);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

LaunchShape launch_shape(const std::vector<int32_t>& sizes, int64_t tokens, bool uniform_decode) {
  const auto at = std::lower_bound(sizes.begin(), sizes.end(), tokens);
  if (at == sizes.end()) return {GraphMode::kEager, tokens};
  return {uniform_decode ? GraphMode::kFull : GraphMode::kPiecewise, *at};
}

double host_time(const EngineProfile& e, GraphMode mode, int64_t layers, int64_t seqs) {
  const auto n = static_cast<double>(seqs);
  double t = e.step + e.step_per_seq * n;
  if (!e.async_scheduling) t += e.sync_step + e.sync_step_per_seq * n;
  switch (mode) {
    case GraphMode::kFull: return t + e.graph_launch;
    case GraphMode::kPiecewise: return t + e.piecewise_layer * static_cast<double>(layers);
    case GraphMode::kEager: return t + e.eager_layer * static_cast<double>(layers);
  }
  return t;
}

}  // namespace servesim
