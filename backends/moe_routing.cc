#include "backends/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace servesim {

double expected_experts(int64_t experts, int64_t top_k, double tokens, double skew) {
  const double e = static_cast<double>(experts), k = static_cast<double>(top_k);
  if (tokens <= 0 || experts <= 0) return 0;
  if (skew <= 0) return e * (1 - std::pow(1 - k / e, tokens));
  double norm = 0;
  for (int64_t i = 0; i < experts; ++i) norm += std::pow(static_cast<double>(i + 1), -skew);
  double touched = 0;
  for (int64_t i = 0; i < experts; ++i) {
    const double q = std::min(1.0, k * std::pow(static_cast<double>(i + 1), -skew) / norm);
    touched += 1 - std::pow(1 - q, tokens);
  }
  return touched;
}

double busiest_gpu_load(int64_t experts, int64_t top_k, int64_t gpus, double skew) {
  if (skew <= 0 || experts <= 0 || gpus <= 1) return 1;
  const double k = static_cast<double>(top_k);
  double norm = 0;
  for (int64_t i = 0; i < experts; ++i) norm += std::pow(static_cast<double>(i + 1), -skew);
  // Each GPU's expected routed rows per token: its experts' chances of being picked.
  std::vector<double> load(static_cast<size_t>(gpus), 0);
  const int64_t per_gpu = std::max<int64_t>(1, experts / gpus);
  for (int64_t i = 0; i < experts; ++i) {
    const double q = std::min(1.0, k * std::pow(static_cast<double>(i + 1), -skew) / norm);
    load[static_cast<size_t>(std::min(i / per_gpu, gpus - 1))] += q;
  }
  double total = 0, most = 0;
  for (const double l : load) {
    total += l;
    most = std::max(most, l);
  }
  return total > 0 ? most * static_cast<double>(gpus) / total : 1;
}

}  // namespace servesim
