// `sim [run] --seeds N`: error bars over seeds. The N runs are a sweep of kind "seeds" over the key
// `seed` (runner/sweep.h: each run recorded as usual, run in parallel like a sweep's points); the
// seeds are the first seed (--seed, else the workload's [generate].seed, else 0), then +1, +2, ...
// The summary (analysis/reports/seed_stats.h) is read back from the database, as `sim report --sweep ID`
// prints it.
#include <unistd.h>

#include <functional>
#include <iostream>
#include <limits>
#include <thread>

#include <boost/program_options.hpp>

#include "analysis/storage/database.h"
#include "analysis/reports/model_band.h"
#include "analysis/reports/seed_stats.h"
#include "backends/hardware.h"
#include "backends/registry.h"
#include "cli/cli.h"
#include "runner/sweep.h"
#include "sim/config/presets.h"
#include "cli/stop_signals.h"
#include "sim/config/toml_fields.h"
#include "workloads/replay.h"

namespace servesim {
namespace po = boost::program_options;

po::options_description seeds_options() {
  po::options_description o("Error bars");
  // clang-format off
  o.add_options()
    ("seeds", po::value<int64_t>()->value_name("N"),
     "rerun a generated workload with N seeds (2 to 1000: the first seed, from --seed or the workload, then +1, +2, ...) "
     "and print each metric's mean and 95 % CI; the runs are a sweep of kind seeds (sim report --sweep ID)")
    ("bootstrap", po::value<int64_t>()->value_name("N"),
     "after the run, resample its requests with replacement N times (10 to 100000; 1000 is usual; seeded by --seed, "
     "else 0) and print each latency and throughput metric with its 95 % percentile-bootstrap interval: error bars "
     "for a trace (needs --log requests or iterations; sim report --bootstrap N does the same for a stored run)")
    ("model-uncertainty", po::value<int64_t>()->implicit_value(0)->value_name("N"),
     "rerun the workload with the file's values and with each of the first N bootstrap samples (default: all) of "
     "the hardware file's [calibration] table, and print each metric with its 2.5-97.5 % band over them: how far "
     "the prediction moves with the calibration's own uncertainty (a sweep of kind model-uncertainty)")
    ("jobs,j", po::value<int>()->value_name("N"),
     "with --seeds: runs at once; with --bootstrap: threads (default: the cores; the result does not depend on it)");
  // clang-format on
  return o;
}

Result<BootstrapOptions> bootstrap_options(const po::variables_map& vm, uint64_t seed) {
  BootstrapOptions o;
  o.resamples = vm["bootstrap"].as<int64_t>();
  o.seed = seed;
  if (vm.count("jobs") != 0) o.threads = vm["jobs"].as<int>();
  if (Status s = check_bootstrap_options(o); !s.ok()) return s.error();
  return o;
}

namespace {

// The refusal of --seeds for a workload of fixed requests (`what`: "a trace file"), pointing to the
// bootstrap over its requests.
std::string fixed_requests(const std::string& trace, const std::string& what) {
  return "--seeds: " + trace + " is " + what + ": fixed requests and arrival times, so every seed gives the "
         "same run; --seeds needs a generated workload. For error bars on a trace, resample its requests "
         "instead: sim --trace " + trace + " --bootstrap 1000";
}

// A run repeated over the values of one key, as a sweep of its own kind: the seeds of --seeds, the
// calibration samples of --model-uncertainty.
struct RepeatPlan {
  std::string kind, key, log;
  std::vector<int64_t> values;
  std::function<std::string(int64_t point)> label;  // "seed 12", for progress and failures
  // Prints the summary from the database; `runs` names the sweep and its runs.
  std::function<Status(Database&, const SweepResult&, const std::string& runs, std::ostream&)> summary;
};

// The flags' configuration table and what it resolves to.
struct FlagsConfig {
  toml::table table;
  RunConfig config;
};
Result<FlagsConfig> flags_config(const po::variables_map& vm) {
  Result<toml::table> table = config_table_from_flags(vm);
  if (!table.ok()) return table.error();
  Result<RunConfig> resolved = resolve_config(table.value());
  if (!resolved.ok()) return resolved.error();
  return FlagsConfig{std::move(table).value(), std::move(resolved).value()};
}

int run_repeats(const po::variables_map& vm, toml::table table, const RunConfig& config, const RepeatPlan& plan,
                std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& message) { return bad_input(err, message); };
  SweepOptions options;
  options.kind = plan.kind;
  options.jobs = vm.count("jobs") ? vm["jobs"].as<int>() : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.jobs < 1 || options.jobs > 1024) return bad("--jobs: expected 1 to 1024, got " + std::to_string(options.jobs));
  SweepSpec spec;
  spec.fixed = std::move(table);
  spec.fixed.erase(plan.key);
  if (const auto* name = spec.fixed.get_as<std::string>("name")) {
    spec.name = name->get();
    spec.fixed.erase("name");
  } else {
    spec.name = plan.kind;
  }
  spec.log = plan.log;
  SweepAxis axis{plan.key, {}};
  for (int64_t v : plan.values) axis.values.push_back(v);
  spec.grid.push_back(std::move(axis));
  if (Status s = check_sweep(spec); !s.ok()) return bad(s.error().message);
  if (options.jobs > 1 && is_measuring_backend(config.backend)) {
    err << "sim: note: the cpu and cuda engines measure real time, so the runs go one at a time\n";
    options.jobs = 1;
  }

  const StopSignals stop;
  options.stop = stop.flag();
  const bool tty = vm.count("quiet") == 0 && ::isatty(STDERR_FILENO) == 1;
  options.on_point = [&](const PointOutcome& o, int64_t done, int64_t total) {
    if (tty) err << "\r[" << done << "/" << total << "] " << plan.label(o.point) << " " << o.status << "   " << std::flush;
  };
  Result<SweepResult> ran = run_sweep(spec, options);
  if (tty) err << "\r" << std::string(60, ' ') << "\r";
  if (!ran.ok()) return bad(ran.error().message);
  const SweepResult& r = ran.value();

  Result<std::unique_ptr<Database>> db = Database::open_read_only(r.db_path);
  if (!db.ok()) return bad(db.error().message);
  int64_t first_run = 0, last_run = 0;
  for (const PointOutcome& o : r.points) {
    if (o.run_id == 0) continue;
    first_run = first_run == 0 ? o.run_id : std::min(first_run, o.run_id);
    last_run = std::max(last_run, o.run_id);
  }
  const std::string runs = "sweep " + std::to_string(r.sweep_id) + " in " + r.db_path + " (runs " +
                           std::to_string(first_run) + " to " + std::to_string(last_run) + "; each: sim report --run ID)";
  if (Status s = plan.summary(*db.value(), r, runs, out); !s.ok()) return bad(s.error().message);
  int status = kExitOk;
  for (const PointOutcome& o : r.points) {
    if (o.status == "failed") {
      err << "sim: " << plan.label(o.point) << " (run " << o.run_id << ") failed: " << o.error << "\n";
      status = kExitFailed;
    }
  }
  if (r.interrupted) {
    err << "sim: interrupted; finish it with: sim sweep --resume " << r.sweep_id << " --db " << r.db_path << "\n";
    return kExitInterrupted;
  }
  return status;
}

}  // namespace

int seeds_command(const po::variables_map& vm, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& message) { return bad_input(err, message); };
  const int64_t n = vm["seeds"].as<int64_t>();
  if (n < 2 || n > 1000) {
    return bad("--seeds " + std::to_string(n) + ": expected 2 to 1000 seeds (error bars need at least two runs)");
  }
  Result<FlagsConfig> flags = flags_config(vm);
  if (!flags.ok()) return bad(flags.error().message);
  const RunConfig& config = flags.value().config;
  if (config.trace.empty()) return bad("no workload: give --trace FILE (a generated workload) with --seeds");
  Result<std::string> path = resolve_preset(config.trace, PresetKind::kWorkload, "trace");
  if (!path.ok()) return bad(path.error().message);
  if (is_trace_path(path.value())) return bad(fixed_requests(config.trace, "a trace file"));
  Result<std::string> text = read_text_file(path.value());
  if (!text.ok()) return bad(text.error().message);
  Result<toml::table> workload = parse_toml(text.value(), path.value());
  if (!workload.ok()) return bad(workload.error().message);
  const toml::table* generate = workload.value().get_as<toml::table>("generate");
  if (generate == nullptr) return bad(fixed_requests(config.trace, "a trace (no [generate] table)"));
  int64_t first = 0;
  if (config.seed) {
    first = static_cast<int64_t>(*config.seed);
  } else if (const auto* s = generate->get_as<int64_t>("seed")) {
    first = s->get();
  }
  if (first < 0 || first > std::numeric_limits<int64_t>::max() - n) {
    return bad("--seeds: the seeds " + std::to_string(first) + " + 0.." + std::to_string(n - 1) + " do not fit in 64 bits");
  }

  RepeatPlan plan;
  plan.kind = "seeds";
  plan.key = "seed";
  plan.log = !config.log.empty() ? config.log : config.backend == "unit" ? "iterations" : "requests";
  for (int64_t i = 0; i < n; ++i) plan.values.push_back(first + i);
  plan.label = [first](int64_t point) { return "seed " + std::to_string(first + point); };
  plan.summary = [first, n](Database& db, const SweepResult& r, const std::string& runs, std::ostream& o) -> Status {
    int64_t aggregated = 0;
    Result<std::vector<SeedAggregate>> aggregate = read_seed_aggregate(db, r.sweep_id, &aggregated);
    if (!aggregate.ok()) return aggregate.error();
    o << "Seeds " << first << " to " << first + n - 1 << ": " << runs << "\n" << seed_summary_title(aggregated) << ":\n";
    print_seed_summary(o, aggregate.value());
    return Ok{};
  };
  return run_repeats(vm, std::move(flags.value().table), config, plan, out, err);
}

int model_uncertainty_command(const po::variables_map& vm, std::ostream& out, std::ostream& err) {
  auto bad = [&](const std::string& message) { return bad_input(err, message); };
  const int64_t asked = vm["model-uncertainty"].as<int64_t>();
  Result<FlagsConfig> flags = flags_config(vm);
  if (!flags.ok()) return bad(flags.error().message);
  const RunConfig& config = flags.value().config;
  if (config.trace.empty()) return bad("no workload: give --trace FILE with --model-uncertainty");
  if (config.backend != "roofline") {
    return bad("--model-uncertainty reprices with the roofline's calibrated keys; the " + config.backend +
               " backend does not use them (use --backend roofline)");
  }
  if (config.hardware.empty()) {
    return bad("--model-uncertainty needs --hardware FILE with a [calibration] table (written by sim calibrate "
               "with a bootstrap; a100-80gb-vidur and h100-sxm-vidur ship with one)");
  }
  Result<std::string> hw_path = resolve_preset(config.hardware, PresetKind::kHardware, "--hardware");
  if (!hw_path.ok()) return bad(hw_path.error().message);
  Result<HardwareSpec> hw = load_hardware(hw_path.value());
  if (!hw.ok()) return bad(hw.error().message);
  const auto available = static_cast<int64_t>(hw.value().calibration_samples.size());
  if (available < 2) {
    return bad("--model-uncertainty: " + hw_path.value() + " has " + std::to_string(available) +
               " calibration samples (its [calibration] table); calibrate it with sim calibrate --bootstrap N "
               "(N >= 2) to get them");
  }
  if (asked < 0 || asked == 1 || asked > available) {
    return bad("--model-uncertainty " + std::to_string(asked) + ": expected 2 to " + std::to_string(available) +
               " (the samples in " + hw_path.value() + "), or no number for all of them");
  }
  const int64_t n = asked == 0 ? available : asked;
  if (config.hardware_sample >= 0) return bad("--model-uncertainty sweeps hardware_sample itself; leave it out");

  RepeatPlan plan;
  plan.kind = "model-uncertainty";
  plan.key = "hardware_sample";
  plan.log = !config.log.empty() ? config.log : "summary";  // the band needs the metrics only
  plan.values.push_back(-1);  // the file's own values first
  for (int64_t i = 0; i < n; ++i) plan.values.push_back(i);
  plan.label = [](int64_t point) { return point == 0 ? std::string("the file's values") : "sample " + std::to_string(point - 1); };
  const std::string file = hw_path.value();
  plan.summary = [n, file](Database& db, const SweepResult& r, const std::string& runs, std::ostream& o) -> Status {
    Result<std::vector<ModelBand>> band = read_model_band(db, r.sweep_id);
    if (!band.ok()) return band.error();
    o << "Model uncertainty of " << file << ": " << runs << "\n"
      << "Each metric with the file's values, and 2.5-97.5 % over the " << n
      << " bootstrap samples of its calibration (same workload and seed):\n";
    print_model_band(o, band.value());
    return Ok{};
  };
  return run_repeats(vm, std::move(flags.value().table), config, plan, out, err);
}

}  // namespace servesim
