// `sim run`: the configuration from --config, the flags and --set, run by run_configuration()
// (runner/run.h, which checks all input before the run's row is written), then the summary.
#include <algorithm>
#include <unistd.h>

#include <iostream>

#include <boost/program_options.hpp>

#include "analysis/reports/bootstrap.h"
#include "analysis/storage/database.h"
#include "analysis/reports/report.h"
#include "cli/cli.h"
#include "runner/run.h"
#include "sim/config/config.h"
#include "cli/stop_signals.h"

namespace servesim {
namespace po = boost::program_options;
namespace {

}  // namespace

po::options_description run_options() {
  po::options_description o("Options of `sim run` (configuration keys in brackets, for --config and --set)");
  // clang-format off
  o.add_options()
    ("trace", po::value<std::string>()->value_name("FILE"),
     "workload TOML, or a shipped preset's name (seed-toy.toml, pareto.toml)  [trace]")
    ("policy", po::value<std::string>()->value_name("NAME"),
     "batching policy: static | continuous | chunked-prefill | prefix-cached (default continuous; `sim list policies`)  [policy.name]")
    ("router", po::value<std::string>()->value_name("NAME"),
     "which replica each request goes to: round-robin (default) | random | least-outstanding | least-kv | "
     "power-of-two | prefix-aware (`sim list routers`); options as --set router.KEY=VALUE, and "
     "router.session_affinity = true (a conversation's turns stay on one replica)  [router.name]")
    ("backend", po::value<std::string>()->value_name("NAME"),
     "cost model of one iteration: roofline (default) | unit (`sim list backends`)  [backend]")
    ("hardware", po::value<std::string>()->value_name("NAME|FILE"),
     "GPU: a preset (`sim list hardware`; default a100-80gb) or your own TOML  [hardware]")
    ("model", po::value<std::string>()->value_name("NAME|FILE"),
     "model: a preset (`sim list models`; default llama-3-8b) or any config.json  [model]")
    ("dtype", po::value<std::string>()->value_name("T"),
     "weights and activations: fp16 | bf16 | fp32 | fp8 (default: the model's torch_dtype)  [dtype]")
    ("kv-cache-dtype", po::value<std::string>()->value_name("T"),
     "KV cache: fp16 | bf16 | fp8 | int4 (default: dtype)  [kv.dtype]")
    ("engine", po::value<std::string>()->value_name("NAME|FILE"),
     "serving engine's host and launch costs: a preset (`sim list engines`; default vllm-0.33), your own TOML, or none "
     "(the kernels alone)  [engine.profile]")
    ("enforce-eager", po::bool_switch(), "no CUDA graphs: every kernel launched eagerly, no padding (vLLM's flag)  [enforce_eager]")
    ("config", po::value<std::string>()->value_name("FILE"), "run configuration TOML with any of the keys in brackets")
    ("set", po::value<std::vector<std::string>>()->value_name("KEY=VALUE")->composing(),
     "override a configuration key; repeatable. e.g. --set policy.max_wait=inf --set kv.blocks=512")
    ("db", po::value<std::string>()->value_name("FILE"), "SQLite database the run is appended to (default sim.db)  [db]")
    ("db-sync", po::value<std::string>()->value_name("MODE"),
     "off (the default): hand the rows to the operating system and go on, as most tools write their files; "
     "normal | full: wait until they are on the disk (SQLite's synchronous), for a database that must survive a power cut "
     "during or just after the run  [db_sync]")
    ("seed", po::value<int64_t>()->value_name("N"), "seed for every random draw; overrides the workload's  [seed]")
    ("max-num-seqs", po::value<int64_t>()->value_name("N"), "sequences per iteration (default 256)  [max_num_seqs]")
    ("max-num-batched-tokens", po::value<int64_t>()->value_name("N"),
     "tokens computed per iteration (default 8192)  [max_num_batched_tokens]")
    ("block-size", po::value<int64_t>()->value_name("N"), "tokens per KV block (default 16)  [kv.block_size]")
    ("max-model-len", po::value<int64_t>()->value_name("N"),
     "context per request, prompt and output (default: the model's max_position_embeddings; vLLM's name)  [max_model_len]")
    ("gpu-memory-utilization", po::value<double>()->value_name("F"),
     "fraction of GPU memory for the model and KV cache (default 0.9)  [gpu_memory_utilization]")
    ("tp", po::value<int64_t>()->value_name("N"), "tensor-parallel degree (default 1)  [tp]")
    ("pipeline-parallel-size", po::value<int64_t>()->value_name("N"),
     "pipeline stages per replica, each on --tp GPUs, pp batches in flight (default 1; vLLM's name)  [pp]")
    ("data-parallel-size", po::value<int64_t>()->value_name("N"),
     "data-parallel ranks per replica, each its own scheduler and KV cache on --tp GPUs; a mixture of experts' ranks "
     "step together, its MoE layers over dp x tp GPUs (default 1; vLLM's name)  [dp]")
    ("enable-expert-parallel", po::bool_switch(),
     "with --data-parallel-size or --tp: experts split whole among the GPUs, tokens sent to them all-to-all (vLLM's flag)  "
     "[enable_expert_parallel]")
    ("replicas", po::value<int64_t>()->value_name("N"), "model replicas, requests routed round robin (default 1)  [replicas]")
    ("prefill-replicas", po::value<int64_t>()->value_name("N"),
     "disaggregated serving: N replicas prefill, and hand each request's KV to a decode replica after its first token  [prefill_replicas]")
    ("decode-replicas", po::value<int64_t>()->value_name("M"),
     "disaggregated serving: M replicas decode; the link from each hardware's network_gbs and network_latency_us, "
     "or --set disaggregation.link_gbs=GBS --set disaggregation.link_latency_us=US  [decode_replicas]")
    ("name", po::value<std::string>()->value_name("TEXT"), "a label stored with the run  [name]")
    ("request-rate", po::value<std::string>()->value_name("R"),
     "requests per second: generated workloads draw Poisson arrivals at R; traces are re-timed to a mean rate of R, keeping their burstiness; inf sends all at once  [request_rate]")
    ("burstiness", po::value<std::string>()->value_name("B"),
     "gamma shape of generated arrivals, as vLLM bench (1 = Poisson; < 1 burstier)  [burstiness]")
    ("time-scale", po::value<std::string>()->value_name("F"), "multiply every arrival time by F  [time_scale]")
    ("rate-scale", po::value<std::string>()->value_name("F"),
     "F times the arrival rate, keeping the trace's shape: every arrival time divided by F (time_scale 1/F)  [rate_scale]")
    ("price-by", po::value<std::string>()->value_name("gpu|node"),
     "cost of the GPUs (the default), or of the whole nodes they take: the replicas packed into nodes of the "
     "hardware's gpus_per_node, at its node_price_per_hour_usd  [price_by]")
    ("num-prompts", po::value<std::string>()->value_name("N"), "the first N requests only  [num_prompts]")
    ("max-concurrency", po::value<std::string>()->value_name("C"),
     "closed loop: at most C requests in flight; the next is sent when one finishes  [max_concurrency]")
    ("goodput", po::value<std::vector<std::string>>()->value_name("KEY:MS")->multitoken()->composing(),
     "SLOs in milliseconds for request_goodput and slo_attainment, as vLLM bench: ttft:2000 tpot:100 e2el:10000  [goodput.ttft, ...]")
    ("metric-percentiles", po::value<std::string>()->value_name("LIST"),
     "percentiles to store and print beyond the standard 25,50,75,90,95,99, as vLLM bench: 25,50,99.9  [metric_percentiles]")
    ("log", po::value<std::string>()->value_name("WHAT"),
     "rows logged: requests (every request, and per replica a timeline row per simulated second, or per longer bucket for a workload spanning more than 2,000 s: --set log_resolution; the default) | iterations (also every iteration; the default with the unit backend) | summary (runs and metrics only)  [log]")
    ("threads", po::value<int64_t>()->value_name("N"),
     "simulate groups of replicas on up to N threads at once, where the run allows it (round robin, independent "
     "requests, open loop; the results are the same); 0 (the default): as many as the machine runs at once, less one "
     "for the database writer when rows are written  [threads]")
    ("quiet,q", "no progress line (one is drawn on stderr when it is a terminal)")
    ("help,h", "show this help");
  // clang-format on
  return o;
}

std::optional<int> parse_with_run_options(const std::vector<std::string>& args, const po::options_description& own,
                                          const char* usage, const std::string& name, const std::string& help,
                                          po::variables_map& vm, std::ostream& out, std::ostream& err) {
  po::options_description all;
  all.add(own).add(run_options());
  try {
    po::store(po::command_line_parser(args).options(all).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "sim " << name << ": " << e.what() << "\nTry '" << help << "'.\n";
    return kExitBadInput;
  }
  if (vm.count("help") == 0) return std::nullopt;
  out << usage << "\n" << own << "\n" << run_options();
  return kExitOk;
}

namespace {

void print_run_help(std::ostream& out) {
  out << "Usage: sim [run] --trace FILE [options]\n"
         "Replays a workload through a batching policy, prices every iteration with a backend, logs\n"
         "every request and iteration to SQLite and prints a summary like `vllm bench serve`.\n\n"
      << run_options() << "\n"
      << seeds_options()
      << "\nExamples:\n"
         "  sim --policy continuous --trace pareto.toml\n"
         "  sim --backend unit --policy static --max-num-seqs 3 --trace seed-toy.toml\n"
         "  sim --policy static --set policy.max_wait=inf --set policy.release=batch --trace seed-toy.toml\n"
         "  sim --policy prefix-cached --set policy.vllm_version=0.11.0 --trace shared-prefix.toml\n"
         "  sim --policy chunked-prefill --set policy.scheduling_policy=priority --trace priority.toml\n"
         "  sim --seeds 10 --trace pareto.toml   # mean and 95 % CI of each metric over 10 seeds\n"
         "  sim --trace seed-toy.toml --bootstrap 1000   # 95 % intervals from resampling the requests\n"
         "  sim --trace pareto.toml --hardware a100-80gb-vidur --model llama-2-7b --model-uncertainty\n"
         "                                       # the band from the calibration's own uncertainty\n"
         "  sim report --format json        # the latest run, read back from sim.db\n"
         "\nOther commands: sim report --help, sim list policies|backends|hardware|models\n";
}

// Named options become configuration keys, so precedence is uniform: config file < flags < --set.
Status apply_flags(const po::variables_map& vm, toml::table& table) {
  const std::pair<const char*, const char*> strings[] = {
      {"trace", "trace"}, {"policy", "policy.name"}, {"router", "router.name"}, {"backend", "backend"}, {"hardware", "hardware"},
      {"model", "model"}, {"db", "db"}, {"db-sync", "db_sync"}, {"name", "name"}, {"dtype", "dtype"},
      {"kv-cache-dtype", "kv.dtype"}, {"metric-percentiles", "metric_percentiles"}, {"price-by", "price_by"},
      {"engine", "engine.profile"}};
  for (const auto& [flag, key] : strings) {
    if (vm.count(flag) == 0) continue;
    Status s = set_path(table, key, toml::value<std::string>(vm[flag].as<std::string>()));
    if (!s.ok()) return s;
  }
  const std::pair<const char*, const char*> ints[] = {
      {"seed", "seed"}, {"max-num-seqs", "max_num_seqs"},
      {"max-num-batched-tokens", "max_num_batched_tokens"}, {"block-size", "kv.block_size"},
      {"max-model-len", "max_model_len"},
      {"tp", "tp"}, {"pipeline-parallel-size", "pp"}, {"data-parallel-size", "dp"}, {"replicas", "replicas"}, {"prefill-replicas", "prefill_replicas"},
      {"decode-replicas", "decode_replicas"}, {"threads", "threads"}};
  if (vm.count("replicas") != 0 && table.get_as<toml::array>("replicas") != nullptr) {
    return Error{"--replicas " + std::to_string(vm["replicas"].as<int64_t>()) +
                 ": the configuration gives [[replicas]] groups, which it would replace; change the groups' "
                 "counts, or drop one of the two"};
  }
  for (const auto& [flag, key] : ints) {
    if (vm.count(flag) == 0) continue;
    Status s = set_path(table, key, toml::value<int64_t>(vm[flag].as<int64_t>()));
    if (!s.ok()) return s;
  }
  // Load controls take TOML values, so that "inf" and a misspelt number get the same messages as
  // in a --config file.
  const std::pair<const char*, const char*> values[] = {
      {"request-rate", "request_rate"}, {"burstiness", "burstiness"}, {"time-scale", "time_scale"},
      {"rate-scale", "rate_scale"},
      {"num-prompts", "num_prompts"}, {"max-concurrency", "max_concurrency"}, {"log", "log"}};
  for (const auto& [flag, key] : values) {
    if (vm.count(flag) == 0) continue;
    Status s = apply_set(table, std::string(key) + "=" + vm[flag].as<std::string>());
    if (!s.ok()) return Error{"--" + std::string(flag) + ": " + s.error().message};
  }
  if (vm.count("goodput") != 0) {
    std::vector<std::string> seen;
    for (const std::string& token : vm["goodput"].as<std::vector<std::string>>()) {
      const std::string name = token.substr(0, token.find(':'));
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        return Error{"--goodput '" + token + "': " + name + " is given twice; give each SLO once"};
      }
      seen.push_back(name);
      if (Status s = apply_goodput_token(token, table); !s.ok()) return s;
    }
  }
  if (vm.count("enable-expert-parallel") != 0 && vm["enable-expert-parallel"].as<bool>()) {
    if (Status s = set_path(table, "enable_expert_parallel", toml::value<bool>(true)); !s.ok()) return s;
  }
  if (vm.count("enforce-eager") != 0 && vm["enforce-eager"].as<bool>()) {
    if (Status s = set_path(table, "enforce_eager", toml::value<bool>(true)); !s.ok()) return s;
  }
  if (vm.count("gpu-memory-utilization") != 0) {
    Status s = set_path(table, "gpu_memory_utilization",
                        toml::value<double>(vm["gpu-memory-utilization"].as<double>()));
    if (!s.ok()) return s;
  }
  if (vm.count("set") != 0) {
    for (const std::string& a : vm["set"].as<std::vector<std::string>>()) {
      Status s = apply_set(table, a);
      if (!s.ok()) return s;
    }
  }
  return Ok{};
}

}  // namespace

int bad_input(std::ostream& err, const std::string& message) {
  err << "sim: " << message << "\n";
  return kExitBadInput;
}

Result<toml::table> config_table_from_flags(const po::variables_map& vm) {
  toml::table table;
  if (vm.count("config") != 0) {
    Result<toml::table> loaded = load_config_file(vm["config"].as<std::string>());
    if (!loaded.ok()) return loaded.error();
    table = std::move(loaded.value());
  }
  if (Status s = apply_flags(vm, table); !s.ok()) return s.error();
  return table;
}

Result<RunConfig> config_from_flags(const po::variables_map& vm) {
  Result<toml::table> table = config_table_from_flags(vm);
  if (!table.ok()) return table.error();
  return resolve_config(std::move(table).value());
}

namespace {

// A set of runs (--seeds, --model-uncertainty) is its own command; --bootstrap and --jobs are
// checked against them. The exit status when the flags are handled (or refused) here; nullopt:
// one run.
std::optional<int> run_sets(const po::variables_map& vm, bool bootstrap, std::ostream& out, std::ostream& err) {
  if (bootstrap && vm.count("seeds") != 0) {
    return bad_input(err, "give --seeds (reruns of a generated workload) or --bootstrap (resamples of one run's "
                          "requests), not both");
  }
  if (vm.count("model-uncertainty") != 0) {
    if (vm.count("seeds") != 0 || bootstrap) {
      return bad_input(err, "give one of --seeds, --bootstrap and --model-uncertainty: each is a separate set of runs");
    }
    return model_uncertainty_command(vm, out, err);
  }
  if (vm.count("seeds") != 0) return seeds_command(vm, out, err);
  if (vm.count("jobs") != 0 && !bootstrap) {
    return bad_input(err, "--jobs goes with --seeds, --model-uncertainty or --bootstrap (sim sweep has its own)");
  }
  return std::nullopt;
}

// The run's summary, how it ended as an exit status, and its resamples when asked for.
int finish_run(const RunOutput& result, const RunConfig& config, const std::optional<BootstrapOptions>& resampling,
               std::ostream& out, std::ostream& err) {
  if (result.run_id == 0) {  // interrupted while loading
    err << "sim: " << result.error << "\n";
    return kExitInterrupted;
  }
  print_summary(out, result.header, result.metrics);
  if (!result.write_error.empty()) {
    err << "sim: writing " << config.db << " failed: " << result.write_error << "\n";
    return kExitFailed;
  }
  if (result.status == "failed") {
    err << "sim: run " << result.run_id << " failed: " << result.error << "\n";
    return result.bad_input ? kExitBadInput : kExitFailed;
  }
  if (result.status == "interrupted") {
    err << "sim: interrupted; run " << result.run_id << " keeps what was logged (status interrupted)\n";
    return kExitInterrupted;
  }
  if (resampling) {  // read back from the database, as sim report --bootstrap does
    Result<std::unique_ptr<Database>> db = Database::open_read_only(config.db);
    if (!db.ok()) return bad_input(err, db.error().message);
    Result<BootstrapResult> b = read_bootstrap(*db.value(), result.run_id, config.backend == "unit", *resampling);
    if (!b.ok()) return bad_input(err, b.error().message);
    print_bootstrap_summary(out, b.value());
  }
  return kExitOk;
}

}  // namespace

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::variables_map vm;
  try {
    po::options_description all;
    all.add(run_options()).add(seeds_options());
    po::store(po::command_line_parser(args).options(all).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return bad_input(err, std::string(e.what()) + "\nTry 'sim --help'.");
  }
  if (vm.count("help") != 0) {
    print_run_help(out);
    return kExitOk;
  }
  const bool bootstrap = vm.count("bootstrap") != 0;
  if (std::optional<int> handled = run_sets(vm, bootstrap, out, err)) return *handled;

  // From here on SIGINT, SIGTERM and SIGHUP stop the run cleanly instead of killing the process.
  const StopSignals stop;

  Result<RunConfig> resolved = config_from_flags(vm);
  if (!resolved.ok()) return bad_input(err, resolved.error().message);
  const RunConfig& config = resolved.value();
  std::optional<BootstrapOptions> resampling;
  if (bootstrap) {
    Result<BootstrapOptions> b = bootstrap_options(vm, config.seed.value_or(0));
    if (!b.ok()) return bad_input(err, b.error().message);
    if (config.log == "summary") {
      return bad_input(err, "--bootstrap resamples the run's requests rows, which --log summary does not write: "
                            "use --log requests (the default) or --log iterations");
    }
    resampling = b.value();
  }
  RunEnvironment env;
  env.stop = stop.flag();
  env.notes = &err;
  // A progress line only where someone watches: stderr a terminal, and no --quiet.
  if (vm.count("quiet") == 0 && ::isatty(STDERR_FILENO) == 1) env.progress = &err;
  Result<RunOutput> ran = run_configuration(config, env);
  if (!ran.ok()) {
    if (!ran.error().storage) return bad_input(err, ran.error().message);
    err << "sim: writing " << config.db << " failed: " << ran.error().message << "\n";
    return kExitFailed;
  }
  return finish_run(ran.value(), config, resampling, out, err);
}

}  // namespace servesim
