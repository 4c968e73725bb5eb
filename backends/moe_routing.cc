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

}  // namespace servesim
