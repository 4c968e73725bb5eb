// `sim validate --vllm-result FILE`: replays the requests of a `vllm bench serve --save-result
// --save-detailed` file through the simulator (runner/run.h, with the requests built in memory)
// and compares the measured latencies with the simulated ones (analysis/calibration/vllm_validate.h).
#include <cmath>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "analysis/storage/database.h"
#include "analysis/calibration/vllm_validate.h"
#include "cli/cli.h"
#include "runner/run.h"
#include "sim/io/output_file.h"
#include "sim/config/presets.h"
#include "cli/stop_signals.h"
#include "sim/config/toml_fields.h"
#include "workloads/vllm_bench_result.h"

namespace servesim {
namespace po = boost::program_options;
namespace {

constexpr const char* kUsage =
    "Usage: sim validate --vllm-result FILE [--hardware NAME|FILE] [--model NAME|FILE] [--tp N]\n"
    "                    [--policy NAME] [--max-num-seqs N] [--max-num-batched-tokens N] [--set KEY=VALUE ...]\n"
    "                    [--seed N] [--format text|json] [--db FILE] [--write-simulated FILE]\n"
    "Replays the requests of a `vllm bench serve --save-result --save-detailed` result (vLLM 0.33)\n"
    "through the simulator and compares what vLLM measured with what the simulator predicts: TTFT,\n"
    "TPOT, ITL (every gap) and E2E latency by mean and percentiles 25, 50, 75, 90, 95, 99 (numpy's\n"
    "linear method) side by side in ms, each percentile's relative error (simulated - measured) /\n"
    "measured, their MAPE, and the two-sample Kolmogorov-Smirnov distance D with its asymptotic\n"
    "p-value; and the request counts and output throughput.\n"
    "Each request keeps its prompt and output length. It arrives when the client meant to send it:\n"
    "its start_time (minus its wait for a --max-concurrency slot), relative to the first. A file\n"
    "without start_times has its arrivals drawn as vLLM bench draws them (gamma gaps of shape\n"
    "burstiness at request_rate, the last at n / rate; inf: all at once) from servesim's RNG with\n"
    "--seed (default 0): vLLM's numpy stream cannot be reproduced, so such arrivals are the same in\n"
    "distribution, not the same times. The benchmark's max_concurrency is applied (servesim's\n"
    "--max-concurrency closed loop, latencies counted from the send, as vLLM measures them).\n"
    "Failed requests (a non-empty error) are left out of both sides and counted.\n"
    "The model is --model, else the preset of the file's model_id (meta-llama/Llama-2-7b-hf ->\n"
    "llama-2-7b); the hardware and policy default as in `sim run`. The simulated run is kept only\n"
    "with --db; --write-simulated writes it as a vLLM result file of its own.\n";

// The run options that describe the workload, which here is the file's.
constexpr const char* kFromFile[] = {"trace", "request-rate", "burstiness", "time-scale", "rate-scale", "num-prompts",
                                     "max-concurrency"};

po::options_description own_options() {
  po::options_description o("Options of `sim validate --vllm-result` (besides those of `sim run`)");
  o.add_options()("vllm-result", po::value<std::string>()->value_name("FILE"),
                  "the result of vllm bench serve --save-result --save-detailed")(
      "format", po::value<std::string>()->default_value("text")->value_name("FMT"), "text | json")(
      "write-simulated", po::value<std::string>()->value_name("FILE"),
      "also write the simulated requests as a vLLM result file (--save-detailed layout)");
  return o;
}

int fail(std::ostream& err, const std::string& message) {
  err << "sim validate: " << message << "\n";
  return kExitBadInput;
}

std::string arrivals_text(const VllmBenchResult& r, uint64_t seed) {
  if (r.has_start_times) {
    std::string s = "from start_times";
    if (r.has_queue_times && r.max_concurrency > 0) s += " - queue_times";
    if (r.max_concurrency > 0) s += ", max_concurrency " + std::to_string(r.max_concurrency);
    return s;
  }
  std::string s = std::isinf(r.request_rate)
                      ? std::string("drawn: all at once (request_rate inf)")
                      : "drawn: gamma gaps of shape " + format_number(r.burstiness) + " at " +
                            format_number(r.request_rate) + " req/s, seed " + std::to_string(seed) +
                            " (the same distribution as vLLM's, not the same times)";
  if (r.max_concurrency > 0) s += ", max_concurrency " + std::to_string(r.max_concurrency);
  return s;
}

}  // namespace

Result<RunConfig> vllm_replay_config(const po::variables_map& vm, const VllmBenchResult& measured,
                                     const std::string& path) {
  Result<toml::table> table = config_table_from_flags(vm);
  if (!table.ok()) return table.error();
  toml::table& t = table.value();
  for (const char* key : {"request_rate", "burstiness", "time_scale", "num_prompts", "max_concurrency"}) {
    if (t.contains(key)) {
      return Error{std::string(key) + " does not apply: the requests, their arrivals and the benchmark's "
                                      "max_concurrency come from the --vllm-result file"};
    }
  }
  if (!t.contains("model")) {
    const std::optional<std::string> preset = model_preset_for_repository(measured.model_id);
    if (!preset) {
      return Error{path + ": model_id: " +
                   (measured.model_id.empty() ? std::string("absent") : "'" + measured.model_id + "'") +
                   " is not a shipped model preset; give --model NAME|FILE (`sim list models`, or the "
                   "model's config.json)"};
    }
    (void)set_path(t, "model", toml::value<std::string>(*preset));
  }
  if (!t.contains("db")) {
    (void)set_path(t, "db", toml::value<std::string>(std::string(kInMemoryDatabase)));
    if (!t.contains("log")) (void)set_path(t, "log", toml::value<std::string>("summary"));
  }
  if (measured.max_concurrency > 0) (void)set_path(t, "max_concurrency", toml::value<int64_t>(measured.max_concurrency));
  if (!t.contains("name")) (void)set_path(t, "name", toml::value<std::string>("vllm-result " + path));
  (void)set_path(t, "trace", toml::value<std::string>(path));
  return resolve_config(std::move(t));
}

namespace {

// The measured benchmark beside its replay's run and the tokens `recorder` saw.
VllmComparison compare_replay(const std::string& path, const VllmBenchResult& measured, const Workload& workload,
                              const RunConfig& config, const RunOutput& run, const VllmRequestRecorder& recorder) {
  VllmComparison c;
  c.file = path;
  c.requests = static_cast<int64_t>(measured.requests.size());
  c.failed = measured.failed_count();
  c.simulated = static_cast<int64_t>(workload.requests.size());
  for (size_t i = 0; i < measured.requests.size(); ++i) {
    if (measured.requests[i].failed()) continue;
    const VllmBenchRequest& s = recorder.records()[i];
    if (!s.failed()) {
      ++c.sim_completed;
    } else if (s.error.starts_with("rejected")) {
      ++c.sim_rejected;
    } else {
      ++c.sim_unfinished;
    }
  }
  c.measured_output_throughput = measured.output_throughput;
  c.simulated_output_throughput = run.metric("output_throughput");
  c.arrivals = arrivals_text(measured, config.seed.value_or(0));
  c.header = run.header;
  if (config.db == kInMemoryDatabase) c.header.db_path.clear();  // not kept
  c.latencies = compare_latencies(measured.requests, recorder.records());
  return c;
}

}  // namespace

int validate_vllm_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::variables_map vm;
  if (auto done = parse_with_run_options(args, own_options(), kUsage, "validate", "sim validate --help", vm, out, err)) {
    return *done;
  }
  for (const char* option : kFromFile) {
    if (vm.count(option) != 0) {
      return fail(err, std::string("--") + option + " does not apply: the requests, their arrivals and the "
                                                    "benchmark's max_concurrency come from the --vllm-result file");
    }
  }
  const std::string format = vm["format"].as<std::string>();
  if (format != "text" && format != "json") return fail(err, "--format: expected text or json, got '" + format + "'");
  const std::string path = vm["vllm-result"].as<std::string>();
  Result<VllmBenchResult> loaded = read_vllm_bench_result(path);
  if (!loaded.ok()) return fail(err, loaded.error().message);
  const VllmBenchResult& measured = loaded.value();
  Result<RunConfig> resolved = vllm_replay_config(vm, measured, path);
  if (!resolved.ok()) return fail(err, resolved.error().message);
  const RunConfig& config = resolved.value();
  // Before the replay: the simulated file may replace neither the measured one nor the database.
  std::optional<OutputFile> simulated_file;
  if (vm.count("write-simulated") != 0) {
    std::vector<OutputFile::Protected> protect = {{"--vllm-result", path}};
    if (config.db != kInMemoryDatabase) protect.push_back({"--db", config.db});
    simulated_file.emplace("--write-simulated", vm["write-simulated"].as<std::string>(), std::move(protect));
    if (Status s = simulated_file->check(); !s.ok()) return fail(err, s.error().message);
  }
  Result<Workload> workload = vllm_bench_workload(measured, config.seed.value_or(0));
  if (!workload.ok()) return fail(err, workload.error().message);

  // The replay, every request's tokens recorded as vLLM's client would have seen them.
  const StopSignals stop;
  VllmRequestRecorder recorder(measured.requests.size());
  RunEnvironment env;
  env.workload = &workload.value();
  env.recorders = {&recorder};
  env.stop = stop.flag();
  env.notes = &err;
  Result<RunOutput> ran = run_configuration(config, env);
  if (!ran.ok()) return fail(err, ran.error().message);
  const RunOutput& run = ran.value();
  if (run.status != "done") {
    err << "sim validate: the simulated run " << run.status << (run.error.empty() ? "" : ": " + run.error) << "\n";
    return run.status == "interrupted" ? kExitInterrupted : run.bad_input ? kExitBadInput : kExitFailed;
  }
  print_vllm_comparison(compare_replay(path, measured, workload.value(), config, run, recorder),
                        format == "json" ? ReportFormat::kJson : ReportFormat::kText, out);
  if (simulated_file) {
    if (Status s = simulated_file->write(vllm_detailed_result(measured, recorder.records()).dump() + "\n"); !s.ok()) {
      err << "sim validate: " << s.error().message << "\n";
      return simulated_file->write_failed() ? kExitFailed : kExitBadInput;
    }
  }
  if (!run.write_error.empty()) {
    err << "sim validate: writing " << config.db << " failed: " << run.write_error << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace servesim
