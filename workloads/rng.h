// The random number engine and samplers behind every generated workload.
//
// Determinism across platforms is the point of this file: the standard library's distributions
// (std::normal_distribution and friends) are implementation-defined, so the same seed gives different
// requests with libstdc++ and libc++. Here the engine is xoshiro256** (Blackman and Vigna), seeded
// through splitmix64, and every sampler is written out: uniform doubles from the top 53 bits,
// exponential and Pareto by inversion, normal by Marsaglia's polar method, gamma by Marsaglia–Tsang.
// The only floating-point library calls are std::log, std::exp, std::pow and std::sqrt.
//
// One workload draws from several independent streams (arrivals, prompt lengths, output lengths), each
// an Rng built by Rng::stream(seed, id), so that changing one distribution leaves the others' draws as
// they were.
#pragma once

#include <cstdint>

namespace servesim {

// splitmix64's output function: a bijective mix of 64 bits. mix64(x) is the value splitmix64 returns
// when its state has just become x.
uint64_t mix64(uint64_t x);

// Stream ids for Rng::stream. Fixed constants: changing them changes every generated workload.
inline constexpr uint64_t kArrivalStream = 0x6172726976616c73;  // "arrivals"
inline constexpr uint64_t kPromptStream = 0x70726f6d70747321;   // "prompts!"
inline constexpr uint64_t kOutputStream = 0x6f75747075747321;   // "outputs!"

class Rng {
 public:
  // The engine seeded from `seed` by four splitmix64 steps (the seeding its authors recommend).
  explicit Rng(uint64_t seed);

  // The engine for stream `stream_id` of a run with seed `seed`: Rng(mix64(seed ^ stream_id)).
  static Rng stream(uint64_t seed, uint64_t stream_id);

  // The next 64 random bits.
  uint64_t next();

  // A double uniform in [0, 1), a multiple of 2^-53.
  double uniform();

  // A double uniform in (0, 1], a multiple of 2^-53: safe to take the log of, or to divide by.
  double uniform_pos();

  // An integer uniform in [0, n), without modulo bias. REQUIRES: n >= 1.
  uint64_t below(uint64_t n);

 private:
  uint64_t s_[4];
};

// Exponential with mean 1/rate, by inversion. REQUIRES: rate > 0.
double sample_exponential(Rng& rng, double rate);

// Normal with the given mean and standard deviation (Marsaglia's polar method; the second value of
// each pair is discarded so that every draw depends only on the engine's state). REQUIRES: stddev >= 0.
double sample_normal(Rng& rng, double mean, double stddev);

// Gamma with the given shape k and scale theta (mean k * theta), by Marsaglia–Tsang; for k < 1 it draws
// Gamma(k + 1) and multiplies by U^(1/k). REQUIRES: shape > 0, scale > 0.
double sample_gamma(Rng& rng, double shape, double scale);

// exp(Normal(mu, sigma)): lognormal with median exp(mu) and mean exp(mu + sigma^2 / 2).
// REQUIRES: sigma >= 0.
double sample_lognormal(Rng& rng, double mu, double sigma);

// Classic (type I) Pareto: values >= scale, P(X > x) = (scale / x)^shape; mean shape * scale /
// (shape - 1) when shape > 1. By inversion. REQUIRES: shape > 0, scale > 0.
double sample_pareto(Rng& rng, double shape, double scale);

}  // namespace servesim
