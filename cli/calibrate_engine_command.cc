// `sim calibrate --vllm-result FILE ...`: fits an engine file's host terms (step_us, request_us)
// to `vllm bench serve --save-result --save-detailed` files, each
// replayed as `sim validate --vllm-result` replays it (runner/engine_fit.h), and writes the engine
// file.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "backends/engine_profile.h"
#include "cli/cli.h"
#include "runner/engine_fit.h"
#include "sim/config/presets.h"
#include "sim/config/toml_fields.h"
#include "sim/format_number.h"
#include "sim/io/output_file.h"
#include "workloads/vllm_bench_result.h"

namespace servesim {
namespace po = boost::program_options;
namespace {

constexpr const char* kUsage =
    "Usage: sim calibrate --vllm-result FILE [--vllm-result FILE ...] --out ENGINE.toml\n"
    "                     [--engine NAME|FILE] [--bootstrap N] [--seed N] [run options]\n"
    "Fits the serving engine's host terms to end-to-end measurements: the host time per iteration\n"
    "(step_us) and the API server's time per request (request_us) of the --engine file (default\n"
    "vllm-0.33), so that the replays of the files' requests (as `sim validate --vllm-result` replays\n"
    "them, with the run options given: --hardware, --model, --tp, --policy, ...) have their mean\n"
    "inter-token latency (step_us, by bisection) and mean TTFT (request_us, which adds to it). It fits\n"
    "the requests at even positions of each file and holds out those at odd positions: it prints\n"
    "the held-out error before and after, each value with\n"
    "a 95 % range from --bootstrap resamples of the fitting requests (each refitted), and writes the\n"
    "engine file, which `sim run --engine ENGINE.toml` then prices with.\n";

po::options_description own_options() {
  po::options_description o("Options of `sim calibrate --vllm-result` (besides those of `sim run`)");
  o.add_options()("vllm-result", po::value<std::vector<std::string>>()->value_name("FILE"),
                  "a result of vllm bench serve --save-result --save-detailed; repeat for several")(
      "out", po::value<std::string>()->value_name("FILE"), "the engine file to write (required)")(
      "bootstrap", po::value<int>()->default_value(20)->value_name("N"), "resamples for the 95 % ranges (0: none)")(
      "calibration-seed", po::value<int64_t>()->default_value(1)->value_name("N"), "seed of the resamples");
  return o;
}

int fail(std::ostream& err, const std::string& message) {
  err << "sim calibrate: " << message << "\n";
  return kExitBadInput;
}

std::string fixed(double x, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f %%", 100 * x);
  return buf;
}

void print_fit(const EngineFit& fit, std::ostream& out) {
  out << "Fitted " << fit.keys.size() << " keys in " << fit.evaluations << " replays (" << fit.result << ")\n";
  for (const EngineFitKey& k : fit.keys) {
    out << "  " << k.name << " = " << fixed(k.value, 1) << " us (start " << fixed(k.start, 1) << "; 95 % range "
        << fixed(k.low, 1) << " to " << fixed(k.high, 1) << ")"
        << (k.at_bound ? "  at a bound of its search" : "") << "\n";
  }
  out << "Held-out requests (odd positions): mean TTFT and mean ITL, measured -> simulated\n";
  for (size_t f = 0; f < fit.held_out.size(); ++f) {
    const EngineFitError& a = fit.held_out_start[f];
    const EngineFitError& b = fit.held_out[f];
    out << "  " << b.file << "\n    TTFT " << fixed(b.ttft_measured * 1e3, 2) << " ms -> "
        << fixed(b.ttft_simulated * 1e3, 2) << " ms (" << percent(b.ttft_error()) << "; before "
        << percent(a.ttft_error()) << ")\n    ITL  " << fixed(b.itl_measured * 1e3, 2) << " ms -> "
        << fixed(b.itl_simulated * 1e3, 2) << " ms (" << percent(b.itl_error()) << "; before "
        << percent(a.itl_error()) << ")\n";
  }
}

}  // namespace

int calibrate_engine_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::variables_map vm;
  if (auto done = parse_with_run_options(args, own_options(), kUsage, "calibrate", "sim calibrate --vllm-result --help",
                                         vm, out, err)) {
    return *done;
  }
  if (vm.count("out") == 0) return fail(err, "--out ENGINE.toml is required");
  const int bootstrap = vm["bootstrap"].as<int>();
  if (bootstrap < 0 || bootstrap > 10000) return fail(err, "--bootstrap: expected 0 to 10000 resamples");
  if (vm["calibration-seed"].as<int64_t>() < 0) return fail(err, "--calibration-seed: expected a number >= 0");
  const std::string engine_name = vm.count("engine") != 0 ? vm["engine"].as<std::string>() : kDefaultEngine;
  Result<std::string> engine_path = resolve_preset(engine_name, PresetKind::kEngine, "--engine");
  if (!engine_path.ok()) return fail(err, engine_path.error().message);
  Result<EngineProfile> start = load_engine_profile(engine_path.value());
  if (!start.ok()) return fail(err, start.error().message);
  Result<std::string> start_text = read_text_file(engine_path.value());
  if (!start_text.ok()) return fail(err, start_text.error().message);

  std::vector<OutputFile::Protected> inputs;
  std::vector<EngineFitSource> sources;
  for (const std::string& path : vm["vllm-result"].as<std::vector<std::string>>()) {
    Result<VllmBenchResult> measured = read_vllm_bench_result(path);
    if (!measured.ok()) return fail(err, measured.error().message);
    Result<RunConfig> config = vllm_replay_config(vm, measured.value(), path);
    if (!config.ok()) return fail(err, config.error().message);
    Result<Workload> workload = vllm_bench_workload(measured.value(), config.value().seed.value_or(0));
    if (!workload.ok()) return fail(err, workload.error().message);
    sources.push_back({path, std::move(measured.value()), std::move(config.value()), std::move(workload.value())});
    inputs.push_back({"--vllm-result", path});
  }
  inputs.push_back({"--engine", engine_path.value()});
  OutputFile file("--out", vm["out"].as<std::string>(), std::move(inputs));
  if (Status s = file.check(); !s.ok()) return fail(err, s.error().message);

  std::error_code ec;
  const std::filesystem::path work =
      std::filesystem::temp_directory_path(ec) / ("servesim-engine-fit-" + std::to_string(::getpid()));
  std::filesystem::create_directories(work, ec);
  if (ec) return fail(err, "cannot make a folder for the trial engine files: " + ec.message());
  EngineFitOptions options;
  options.bootstrap = bootstrap;
  options.seed = static_cast<uint64_t>(vm["calibration-seed"].as<int64_t>());
  options.work_dir = work.string();
  Result<EngineFit> fit = fit_engine(start.value(), sources, options);
  std::filesystem::remove_all(work, ec);
  if (!fit.ok()) return fail(err, fit.error().message);
  print_fit(fit.value(), out);
  if (Status s = file.write(engine_file_text(start_text.value(), fit.value())); !s.ok()) {
    err << "sim calibrate: " << s.error().message << "\n";
    return file.write_failed() ? kExitFailed : kExitBadInput;
  }
  out << "Wrote " << vm["out"].as<std::string>() << "\n";
  return kExitOk;
}

}  // namespace servesim
