#include "workloads/rng.h"

#include <cassert>
#include <cmath>

namespace servesim {
namespace {

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;  // 2^-53

}  // namespace

uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

Rng::Rng(uint64_t seed) {
  // splitmix64: the state advances by the golden-ratio increment, each output is mix64 of it.
  for (uint64_t& word : s_) {
    seed += 0x9e3779b97f4a7c15;
    word = mix64(seed);
  }
}

Rng Rng::stream(uint64_t seed, uint64_t stream_id) { return Rng(mix64(seed ^ stream_id)); }

uint64_t Rng::next() {
  // xoshiro256** 1.0 (https://prng.di.unimi.it/xoshiro256starstar.c).
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * kTwoPowMinus53; }

double Rng::uniform_pos() { return static_cast<double>((next() >> 11) + 1) * kTwoPowMinus53; }

uint64_t Rng::below(uint64_t n) {
  assert(n >= 1);
  // Reject the lowest 2^64 mod n values so that every residue is equally likely.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = next();
    if (r >= threshold) return r % n;
  }
}

double sample_exponential(Rng& rng, double rate) { return -std::log(rng.uniform_pos()) / rate; }

double sample_normal(Rng& rng, double mean, double stddev) {
  for (;;) {
    const double u = 2.0 * rng.uniform() - 1.0;
    const double v = 2.0 * rng.uniform() - 1.0;
    const double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return mean + stddev * u * std::sqrt(-2.0 * std::log(s) / s);
  }
}

double sample_gamma(Rng& rng, double shape, double scale) {
  if (shape < 1.0) {
    // Boost: if Y ~ Gamma(k + 1) and U ~ Uniform(0, 1], then Y * U^(1/k) ~ Gamma(k).
    const double y = sample_gamma(rng, shape + 1.0, 1.0);
    return scale * y * std::pow(rng.uniform_pos(), 1.0 / shape);
  }
  // Marsaglia & Tsang (2000), "A simple method for generating gamma variables".
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x;
    double v;
    do {
      x = sample_normal(rng, 0.0, 1.0);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = rng.uniform_pos();
    if (u < 1.0 - 0.0331 * (x * x) * (x * x)) return scale * d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return scale * d * v;
  }
}

double sample_lognormal(Rng& rng, double mu, double sigma) {
  return std::exp(sample_normal(rng, mu, sigma));
}

double sample_pareto(Rng& rng, double shape, double scale) {
  // Inverse of the survival function: U = (scale / x)^shape with U in (0, 1].
  return scale * std::pow(rng.uniform_pos(), -1.0 / shape);
}

}  // namespace servesim
