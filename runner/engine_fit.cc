#include "runner/engine_fit.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>


#include "analysis/calibration/vllm_validate.h"
#include "analysis/metrics/percentiles.h"
#include "analysis/storage/database.h"
#include "runner/run.h"
#include "sim/format_number.h"

namespace servesim {
namespace {

// The searched keys, microseconds: name, the profile's field, upper bound.
struct Key {
  const char* name;
  double EngineProfile::*field;
  double high;
};
constexpr Key kKeys[] = {
    {"step_us", &EngineProfile::step, 20000},
    {"request_us", &EngineProfile::request, 500000},
};
constexpr size_t kDims = std::size(kKeys);

std::string us(double seconds) { return format_number(seconds * 1e6); }

// One decimal: what a file a person reads needs.
std::string rounded(double x) { return format_number(std::round(x * 10) / 10); }

// The whole profile as an engine file (every key, microseconds).
std::string profile_text(const EngineProfile& e) {
  std::ostringstream o;
  o << "name = \"" << e.name << "\"\nengine = \"" << e.engine << "\"\nversion = \"" << e.version << "\"\n"
    << "async_scheduling = " << (e.async_scheduling ? "true" : "false") << "\n"
    << "max_cudagraph_capture_size = " << e.max_cudagraph_capture_size << "\n"
    << "graph_launch_us = " << us(e.graph_launch) << "\npiecewise_layer_us = " << us(e.piecewise_layer)
    << "\neager_layer_us = " << us(e.eager_layer) << "\nstep_us = " << us(e.step)
    << "\nstep_per_seq_us = " << us(e.step_per_seq) << "\nsync_step_us = " << us(e.sync_step)
    << "\nsync_step_per_seq_us = " << us(e.sync_step_per_seq) << "\nrequest_us = " << us(e.request)
    << "\nrequest_per_prompt_token_us = " << us(e.request_per_prompt_token) << "\n";
  return o.str();
}

// Per file, the two halves' weighted means (the weights: a count per request, 0 = left out).
struct Means {
  double ttft = 0, itl = 0;
};
Means weighted_means(const std::vector<VllmBenchRequest>& records, const std::vector<double>& weight) {
  double t = 0, tw = 0, g = 0, gw = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const VllmBenchRequest& r = records[i];
    if (weight[i] == 0 || r.failed()) continue;
    t += weight[i] * r.ttft;
    tw += weight[i];
    for (const double gap : r.itls) g += weight[i] * gap;
    gw += weight[i] * static_cast<double>(r.itls.size());
  }
  return {tw > 0 ? t / tw : 0, gw > 0 ? g / gw : 0};
}

class Problem {
 public:
  // Two numbers per file (mean TTFT and ITL) fit the two keys; the others keep the start's values.
  Problem(const EngineProfile& start, const std::vector<EngineFitSource>& sources, const EngineFitOptions& o)
      : start_(start), sources_(sources), options_(o) {}

  EngineProfile at(const double* x) const {
    EngineProfile e = start_;
    for (size_t k = 0; k < kDims; ++k) e.*(kKeys[k].field) = x[k] * 1e-6;
    return e;
  }

  // Every file replayed under the profile at x: the simulated records, by file.
  Result<std::vector<std::vector<VllmBenchRequest>>> replay(const double* x) {
    ++evaluations_;
    const std::string path = options_.work_dir + "/trial-engine.toml";
    std::ofstream(path) << profile_text(at(x));
    std::vector<std::vector<VllmBenchRequest>> out;
    for (const EngineFitSource& s : sources_) {
      RunConfig config = s.config;
      config.engine_profile = path;
      config.db = std::string(kInMemoryDatabase);
      config.log = "summary";
      VllmRequestRecorder recorder(s.measured.requests.size());
      RunEnvironment env;
      env.workload = &s.workload;
      env.recorders = {&recorder};
      Result<RunOutput> ran = run_configuration(config, env);
      if (!ran.ok()) return Error{s.path + ": " + ran.error().message};
      if (ran.value().status != "done") return Error{s.path + ": the replay " + ran.value().status + ": " + ran.value().error};
      out.push_back(recorder.records());
    }
    return out;
  }

  // The errors of one half (parity 0: the fitting requests, 1: the held-out ones), each request
  // weighted as `weights` says (by file; empty: 1).
  Result<std::vector<EngineFitError>> errors(const std::vector<std::vector<VllmBenchRequest>>& simulated, int parity,
                                             const std::vector<std::vector<double>>& weights = {}) const {
    std::vector<EngineFitError> out;
    for (size_t f = 0; f < sources_.size(); ++f) {
      const std::vector<VllmBenchRequest>& measured = sources_[f].measured.requests;
      std::vector<double> w(measured.size(), 0);
      for (size_t i = 0; i < measured.size(); ++i) {
        if (static_cast<int>(i % 2) != parity || measured[i].failed() || simulated[f][i].failed()) continue;
        w[i] = weights.empty() ? 1 : weights[f][i];
      }
      const Means m = weighted_means(measured, w), s = weighted_means(simulated[f], w);
      if (m.ttft <= 0 || m.itl <= 0) {
        return Error{sources_[f].path + ": no successful request with a TTFT and an inter-token latency in its " +
                     (parity == 0 ? "fitting" : "held-out") + " half (the requests at " +
                     (parity == 0 ? "even" : "odd") + " positions)"};
      }
      out.push_back({sources_[f].path, m.ttft, s.ttft, m.itl, s.itl});
    }
    return out;
  }

  // The fit of the fitting half weighted by `weights`, from x0 = (step_us, request_us): step_us
  // by bisection on the mean inter-token latency (it grows with step_us, the API server's time
  // leaves it alone), then request_us in closed form (it adds to every TTFT), twice over.
  Result<std::vector<double>> solve(std::vector<double> x, const std::vector<std::vector<double>>& weights) {
    for (int round = 0; round < 2; ++round) {
      auto itl_gap = [&](double step) -> Result<double> {
        std::vector<double> at = {step, x[1]};
        auto sim = replay(at.data());
        if (!sim.ok()) return sim.error();
        auto e = errors(sim.value(), 0, weights);
        if (!e.ok()) return e.error();
        double g = 0;
        for (const EngineFitError& f : e.value()) g += std::log(f.itl_simulated / f.itl_measured);
        return g;
      };
      double lo = 0, hi = kKeys[0].high;
      auto glo = itl_gap(lo), ghi = itl_gap(hi);
      if (!glo.ok()) return glo.error();
      if (!ghi.ok()) return ghi.error();
      if (glo.value() >= 0) {
        x[0] = lo;
      } else if (ghi.value() <= 0) {
        x[0] = hi;
      } else {
        while (hi - lo > 1) {  // to a microsecond
          const double mid = 0.5 * (lo + hi);
          auto g = itl_gap(mid);
          if (!g.ok()) return g.error();
          (g.value() < 0 ? lo : hi) = mid;
        }
        x[0] = 0.5 * (lo + hi);
      }
      auto sim = replay(x.data());
      if (!sim.ok()) return sim.error();
      auto e = errors(sim.value(), 0, weights);
      if (!e.ok()) return e.error();
      double shift = 0;
      for (const EngineFitError& f : e.value()) shift += (f.ttft_measured - f.ttft_simulated) * 1e6;
      x[1] = std::clamp(x[1] + shift / static_cast<double>(e.value().size()), 0.0, kKeys[1].high);
    }
    return x;
  }

  int evaluations() const { return evaluations_; }

 private:
  const EngineProfile& start_;
  const std::vector<EngineFitSource>& sources_;
  const EngineFitOptions& options_;
  int evaluations_ = 0;
};

// splitmix64, as the hardware calibration's resamples use it: the same draws everywhere.
uint64_t next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Each file's fitting requests drawn with replacement: a count per request.
std::vector<std::vector<double>> resample(const std::vector<EngineFitSource>& sources, uint64_t& state) {
  std::vector<std::vector<double>> w;
  for (const EngineFitSource& s : sources) {
    std::vector<size_t> fitting;
    for (size_t i = 0; i < s.measured.requests.size(); i += 2) fitting.push_back(i);
    std::vector<double> counts(s.measured.requests.size(), 0);
    for (size_t j = 0; j < fitting.size(); ++j) counts[fitting[next(state) % fitting.size()]] += 1;
    w.push_back(std::move(counts));
  }
  return w;
}

}  // namespace

Result<EngineFit> fit_engine(const EngineProfile& start, const std::vector<EngineFitSource>& sources,
                             const EngineFitOptions& options) {
  Problem p(start, sources, options);
  std::vector<double> x0;
  for (const Key& k : kKeys) x0.push_back(start.*(k.field) * 1e6);
  EngineFit fit;
  auto before = p.replay(x0.data());
  if (!before.ok()) return before.error();
  auto held_before = p.errors(before.value(), 1);
  if (!held_before.ok()) return held_before.error();
  fit.held_out_start = held_before.value();
  auto best = p.solve(x0, {});
  if (!best.ok()) return best.error();
  fit.result = "bisection on ITL, TTFT shift";
  const std::vector<double> x = best.value();
  fit.fitted = p.at(x.data());
  auto after = p.replay(x.data());
  if (!after.ok()) return after.error();
  fit.held_out = p.errors(after.value(), 1).value();
  std::vector<std::vector<double>> draws(kDims);
  uint64_t state = options.seed;
  for (int b = 0; b < options.bootstrap; ++b) {
    auto r = p.solve(x, resample(sources, state));
    if (!r.ok()) return r.error();
    for (size_t k = 0; k < kDims; ++k) draws[k].push_back(r.value()[k]);
  }
  for (size_t k = 0; k < kDims; ++k) {
    EngineFitKey key{kKeys[k].name, x0[k], x[k], x[k], x[k], false};
    if (!draws[k].empty()) {
      std::sort(draws[k].begin(), draws[k].end());
      key.low = percentile(draws[k], 2.5);
      key.high = percentile(draws[k], 97.5);
    }
    key.at_bound = x[k] <= kKeys[k].high * 1e-3 || x[k] >= kKeys[k].high * (1 - 1e-3);
    fit.keys.push_back(key);
  }
  fit.evaluations = p.evaluations();
  return fit;
}

std::string engine_file_text(const std::string& start_text, const EngineFit& fit) {
  std::ostringstream head;
  head << "# Host terms fitted by `sim calibrate --vllm-result` to the mean TTFT and inter-token latency of\n"
          "# the requests at even positions of:\n";
  for (const EngineFitError& e : fit.held_out) head << "#   " << e.file << "\n";
  head << "# held out (odd positions): ";
  for (const EngineFitError& e : fit.held_out) {
    head << "TTFT " << rounded(100 * e.ttft_error()) << " %, ITL " << rounded(100 * e.itl_error()) << " %; ";
  }
  head << "\n";
  std::istringstream in(start_text);
  std::ostringstream body;
  std::vector<bool> written(fit.keys.size(), false);
  for (std::string line; std::getline(in, line);) {
    const std::string key = line.substr(0, line.find_first_of(" =\t"));
    for (size_t k = 0; k < fit.keys.size(); ++k) {
      if (key == fit.keys[k].name) {
        line = key + " = " + rounded(fit.keys[k].value) + "   # fitted; 95 % range " + rounded(fit.keys[k].low) +
               " to " + rounded(fit.keys[k].high);
        written[k] = true;
      }
    }
    body << line << "\n";
  }
  for (size_t k = 0; k < fit.keys.size(); ++k) {
    if (!written[k]) body << fit.keys[k].name << " = " << rounded(fit.keys[k].value) << "   # fitted\n";
  }
  return head.str() + body.str();
}

}  // namespace servesim
