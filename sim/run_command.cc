// `sim run`: resolve the configuration, load the workload, build one policy and backend per replica,
// open the database, simulate, and print the summary. Everything that reads user input is checked
// before the run's row is written, so bad input leaves no half-written run.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>

#include <boost/program_options.hpp>

#include "analysis/batch_log.h"
#include "analysis/database.h"
#include "analysis/db_recorder.h"
#include "analysis/metrics.h"
#include "analysis/report.h"
#include "backends/registry.h"
#include "policies/registry.h"
#include "sim/cli.h"
#include "sim/config.h"
#include "sim/presets.h"
#include "sim/simulator.h"
#include "sim/stop_signals.h"
#include "workloads/workload.h"

namespace servesim {
namespace po = boost::program_options;
namespace {

po::options_description run_options() {
  po::options_description o("Options of `sim run` (configuration keys in brackets, for --config and --set)");
  // clang-format off
  o.add_options()
    ("trace", po::value<std::string>()->value_name("FILE"),
     "workload TOML, or a shipped preset's name (seed-toy.toml, pareto.toml)  [trace]")
    ("policy", po::value<std::string>()->value_name("NAME"),
     "batching policy: static | continuous | chunked-prefill | prefix-cached (default continuous; `sim list policies`)  [policy.name]")
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
    ("config", po::value<std::string>()->value_name("FILE"), "run configuration TOML with any of the keys in brackets")
    ("set", po::value<std::vector<std::string>>()->value_name("KEY=VALUE")->composing(),
     "override a configuration key; repeatable. e.g. --set policy.max_wait=inf --set kv.blocks=512")
    ("db", po::value<std::string>()->value_name("FILE"), "SQLite database the run is appended to (default sim.db)  [db]")
    ("seed", po::value<int64_t>()->value_name("N"), "seed for every random draw; overrides the workload's  [seed]")
    ("max-num-seqs", po::value<int64_t>()->value_name("N"), "sequences per iteration (default 256)  [max_num_seqs]")
    ("max-num-batched-tokens", po::value<int64_t>()->value_name("N"),
     "tokens computed per iteration (default 8192)  [max_num_batched_tokens]")
    ("block-size", po::value<int64_t>()->value_name("N"), "tokens per KV block (default 16)  [kv.block_size]")
    ("gpu-memory-utilization", po::value<double>()->value_name("F"),
     "fraction of GPU memory for the model and KV cache (default 0.9)  [gpu_memory_utilization]")
    ("tp", po::value<int64_t>()->value_name("N"), "tensor-parallel degree (default 1)  [tp]")
    ("replicas", po::value<int64_t>()->value_name("N"), "model replicas, requests routed round robin (default 1)  [replicas]")
    ("name", po::value<std::string>()->value_name("TEXT"), "a label stored with the run  [name]")
    ("help,h", "show this help");
  // clang-format on
  return o;
}

void print_run_help(std::ostream& out) {
  out << "Usage: sim [run] --trace FILE [options]\n"
         "Replays a workload through a batching policy, prices every iteration with a backend, logs\n"
         "every request and iteration to SQLite and prints a summary like `vllm bench serve`.\n\n"
      << run_options()
      << "\nExamples:\n"
         "  sim --policy continuous --trace pareto.toml\n"
         "  sim --backend unit --policy static --max-num-seqs 3 --trace seed-toy.toml\n"
         "  sim --policy static --set policy.max_wait=inf --set policy.release=batch --trace seed-toy.toml\n"
         "  sim --policy prefix-cached --set policy.vllm_version=0.11.0 --trace shared-prefix.toml\n"
         "  sim --policy chunked-prefill --set policy.scheduling_policy=priority --trace priority.toml\n"
         "  sim report --format json        # the latest run, read back from sim.db\n"
         "\nOther commands: sim report --help, sim list policies|backends|hardware|models\n";
}

// Named options become configuration keys, so precedence is uniform: config file < flags < --set.
Status apply_flags(const po::variables_map& vm, toml::table& table) {
  const std::pair<const char*, const char*> strings[] = {
      {"trace", "trace"}, {"policy", "policy.name"}, {"backend", "backend"}, {"hardware", "hardware"},
      {"model", "model"}, {"db", "db"}, {"name", "name"}, {"dtype", "dtype"},
      {"kv-cache-dtype", "kv.dtype"}};
  for (const auto& [flag, key] : strings) {
    if (vm.count(flag) == 0) continue;
    Status s = set_path(table, key, toml::value<std::string>(vm[flag].as<std::string>()));
    if (!s.ok()) return s;
  }
  const std::pair<const char*, const char*> ints[] = {
      {"seed", "seed"}, {"max-num-seqs", "max_num_seqs"},
      {"max-num-batched-tokens", "max_num_batched_tokens"}, {"block-size", "kv.block_size"},
      {"tp", "tp"}, {"replicas", "replicas"}};
  for (const auto& [flag, key] : ints) {
    if (vm.count(flag) == 0) continue;
    Status s = set_path(table, key, toml::value<int64_t>(vm[flag].as<int64_t>()));
    if (!s.ok()) return s;
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

int bad_input(std::ostream& err, const std::string& message) {
  err << "sim: " << message << "\n";
  return kExitBadInput;
}

}  // namespace

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(run_options()).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return bad_input(err, std::string(e.what()) + "\nTry 'sim --help'.");
  }
  if (vm.count("help") != 0) {
    print_run_help(out);
    return kExitOk;
  }

  // From here on SIGINT, SIGTERM and SIGHUP stop the run cleanly instead of killing the process.
  const StopSignals stop;

  // 1. The configuration.
  toml::table table;
  if (vm.count("config") != 0) {
    Result<toml::table> loaded = load_config_file(vm["config"].as<std::string>());
    if (!loaded.ok()) return bad_input(err, loaded.error().message);
    table = std::move(loaded.value());
  }
  if (Status s = apply_flags(vm, table); !s.ok()) return bad_input(err, s.error().message);
  Result<RunConfig> resolved = resolve_config(std::move(table));
  if (!resolved.ok()) return bad_input(err, resolved.error().message);
  const RunConfig& config = resolved.value();
  if (config.trace.empty()) {
    return bad_input(err, "no workload: give --trace FILE (e.g. --trace pareto.toml). Try 'sim --help'.");
  }

  // 2. Everything the configuration names.
  Result<std::string> trace = resolve_preset(config.trace, PresetKind::kWorkload, "--trace");
  if (!trace.ok()) return bad_input(err, trace.error().message);
  std::string hardware = config.hardware, model = config.model;
  if (!hardware.empty()) {
    Result<std::string> p = resolve_preset(hardware, PresetKind::kHardware, "--hardware");
    if (!p.ok()) return bad_input(err, p.error().message);
    hardware = p.value();
  }
  if (!model.empty()) {
    Result<std::string> p = resolve_preset(model, PresetKind::kModel, "--model");
    if (!p.ok()) return bad_input(err, p.error().message);
    model = p.value();
  }
  Result<const PolicyInfo*> policy_info = find_policy(config.policy);
  if (!policy_info.ok()) return bad_input(err, "--policy: " + policy_info.error().message);
  Result<const BackendInfo*> backend_info = find_backend(config.backend);
  if (!backend_info.ok()) return bad_input(err, "--backend: " + backend_info.error().message);
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<std::unique_ptr<Backend>> backends;
  BackendSetup setup;
  setup.hardware = hardware;
  setup.model = model;
  setup.tp = config.tp;
  setup.gpu_memory_utilization = config.gpu_memory_utilization;
  setup.dtype = config.dtype;
  setup.kv_dtype = config.kv_dtype;
  setup.block_size = config.block_size;
  setup.max_num_seqs = config.max_num_seqs;
  setup.max_num_batched_tokens = config.max_num_batched_tokens;
  setup.kv_blocks = config.kv_blocks;
  setup.weights = config.engine_weights;
  setup.seed = config.seed.value_or(0);
  for (int32_t i = 0; i < config.replicas; ++i) {
    Result<std::unique_ptr<Policy>> p = policy_info.value()->make(config.policy_options);
    if (!p.ok()) return bad_input(err, p.error().message);
    policies.push_back(std::move(p.value()));
    Result<std::unique_ptr<Backend>> b = backend_info.value()->make(setup);
    if (!b.ok()) return bad_input(err, b.error().message);
    backends.push_back(std::move(b.value()));
  }
  Result<Workload> workload = load_workload(trace.value(), config.seed);
  if (!workload.ok()) return bad_input(err, workload.error().message);
  if (workload.value().requests.empty()) return bad_input(err, trace.value() + ": the workload has no requests");
  // The files the backend actually uses (its defaults included), for the record.
  if (!backends.front()->hardware_path().empty()) hardware = backends.front()->hardware_path();
  if (!backends.front()->model_path().empty()) model = backends.front()->model_path();

  // 3. The database and the run's row: from here on the run is recorded, whatever happens.
  Result<std::unique_ptr<Database>> db = Database::open(config.db);
  if (!db.ok()) return bad_input(err, db.error().message);
  RunInfo info;
  info.name = config.name;
  info.policy = config.policy;
  info.backend = config.backend;
  info.hardware = hardware;
  info.model = model;
  info.workload = trace.value();
  info.config_toml = config_to_toml(config, policies.front()->options());
  info.seed = workload.value().seed;
  info.version = SERVESIM_VERSION;
  info.host = this_host();
  info.pid = static_cast<int64_t>(::getpid());
  if (stop.requested()) {  // a signal while loading: nothing was recorded, nothing is
    err << "sim: interrupted before the run started; nothing was written to " << config.db << "\n";
    return kExitInterrupted;
  }
  Result<int64_t> run_id = db.value()->begin_run(info);
  if (!run_id.ok()) return bad_input(err, run_id.error().message);

  SimOptions options;
  options.replicas = config.replicas;
  options.limits = {config.max_num_seqs, config.max_num_batched_tokens};
  options.block_size = config.block_size;
  options.kv_blocks = config.kv_blocks;
  options.default_max_tokens = config.max_tokens;
  options.max_model_len = backends.front()->max_model_len();
  options.prefix_caching = policy_info.value()->prefix_caching;
  MetricsAccumulator metrics({config.max_num_seqs, config.replicas});
  DbRecorder writer(*db.value(), run_id.value(), metrics);
  // A measuring backend also logs every batch's items, for `sim validate --hardware` and
  // `sim calibrate`; declared after the writer so that its rows land in the writer's transaction.
  std::optional<BatchLog> batch_log;
  if (config.backend == "cpu" || config.backend == "cuda") batch_log.emplace(*db.value(), run_id.value());
  std::vector<Recorder*> recorders = {&metrics};
  if (batch_log) recorders.push_back(&*batch_log);
  recorders.push_back(&writer);
  const bool counts_steps = backends.front()->counts_steps();
  if (counts_steps && (!hardware.empty() || !model.empty() || config.tp != 1 ||
                       config.gpu_memory_utilization != RunConfig{}.gpu_memory_utilization)) {
    err << "sim: note: the " << config.backend
        << " backend ignores --hardware, --model, --tp and --gpu-memory-utilization "
           "(they are recorded with the run)\n";
  }
  Simulator sim(workload.value().requests, options, std::move(policies), std::move(backends),
                std::move(recorders));

  const RunResult result = sim.run(stop.flag());  // returns at once if a signal came already

  SummaryHeader header;
  header.run_id = run_id.value();
  header.db_path = config.db;
  header.name = config.name;
  header.policy = config.policy;
  header.backend = counts_steps ? "unit" : config.backend;
  header.hardware = hardware;
  header.model = model;
  header.workload = trace.value();
  header.mirrors = policy_release(info.config_toml);
  switch (result.outcome) {
    case RunOutcome::kDone: header.status = "done"; break;
    case RunOutcome::kInterrupted: header.status = "interrupted"; break;
    case RunOutcome::kFailed: header.status = "failed"; break;
  }
  print_summary(out, header, metrics.compute());
  if (batch_log && !batch_log->write_error().empty()) {
    err << "sim: writing batch_items failed: " << batch_log->write_error() << "\n";
  }
  if (!writer.write_error().empty()) {
    err << "sim: writing " << config.db << " failed: " << writer.write_error() << "\n";
    return kExitFailed;
  }
  if (result.outcome == RunOutcome::kFailed) {
    err << "sim: run " << run_id.value() << " failed: " << result.error << "\n";
    return result.bad_input ? kExitBadInput : kExitFailed;
  }
  if (result.outcome == RunOutcome::kInterrupted) {
    err << "sim: interrupted; run " << run_id.value() << " keeps what was logged (status interrupted)\n";
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace servesim
