// How many distinct experts the tokens of one iteration touch in a mixture-of-experts layer.
//
// Each token picks k of E experts. Under uniform routing an expert is missed by one token with
// probability 1 - k/E, so T tokens touch E (1 - (1 - k/E)^T) experts on average. Real routers are
// skewed (a few experts hot): with skew s > 0, expert i's popularity is proportional to (i + 1)^-s,
// a token includes it with probability q_i = min(1, k p_i) (p normalized), and T tokens touch
// sum_i (1 - (1 - q_i)^T) of them. s = 0 is the uniform case exactly.
#pragma once

#include <cstdint>

namespace servesim {

// Expected distinct experts touched by `tokens` tokens (>= 0, fractional allowed).
double expected_experts(int64_t experts, int64_t top_k, double tokens, double skew = 0);

// Expert parallelism: the experts split whole, in order, among `gpus` GPUs (expert i on GPU
// i / (experts / gpus), as vLLM places them without load balancing); the busiest GPU's share of the
// routed tokens over the mean share: 1 under uniform routing, more as skew makes the first
// experts hot. REQUIRES: gpus >= 1.
double busiest_gpu_load(int64_t experts, int64_t top_k, int64_t gpus, double skew);

}  // namespace servesim
