// `sim sweep`: a grid of configurations, run in parallel into one database (runner/sweep.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "analysis/storage/merge.h"
#include "backends/registry.h"
#include "analysis/storage/sweep_db.h"
#include "analysis/reports/sweep_report.h"
#include "cli/cli.h"
#include "runner/sweep.h"
#include "cli/stop_signals.h"

namespace servesim {
namespace po = boost::program_options;

namespace {

void print_sweep_help(std::ostream& out, const po::options_description& sweep) {
  out << "Usage: sim sweep [SWEEP.toml] [--grid KEY=V1,V2,...]... [run options] [-j N]\n"
         "       sim sweep --resume ID [--db FILE] [-j N]\n"
         "Runs every point of a grid over configuration keys (any key of `sim run --help`, in\n"
         "brackets there: replicas, tp, hardware, request_rate, policy.name, ...) into one database,\n"
         "in parallel, and prints the table. The run options give the values every point shares.\n"
         "A point that cannot run is recorded as failed with its reason, and the sweep goes on.\n\n"
      << sweep
      << "\nExamples:\n"
         "  sim sweep --trace pareto.toml --grid replicas=1,2,4 --grid request_rate=4,8,16\n"
         "  sim sweep plan.toml -j 2 --db plan.db\n"
         "  sim report --sweep --db plan.db --format csv\n"
         "  sim sweep --shard 0/4 plan.toml --db part0.db    # then: sim merge part*.db --into all.db\n";
}

// Sets every value of `over` into `base`, descending into tables.
void merge_into(toml::table& base, const toml::table& over) {
  for (const auto& [key, v] : over) {
    const std::string_view k = key.str();  // a plain variable: clang 14 cannot capture a binding
    if (const toml::table* t = v.as_table(); t != nullptr && base.get_as<toml::table>(k)) {
      merge_into(*base.get_as<toml::table>(k), *t);
      continue;
    }
    v.visit([&](const auto& x) { base.insert_or_assign(k, x); });
  }
}

// Says which fixed values the grid replaces (a --tp beside --grid tp, a [fixed] key in [grid]).
void note_overridden_keys(const SweepSpec& spec, std::ostream& err) {
  for (const std::string& key : overridden_keys(spec)) {
    err << "sim sweep: note: the grid replaces " << key << " of the fixed configuration in every point\n";
  }
}

Result<std::pair<int64_t, int64_t>> parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  char* end = nullptr;
  if (slash != std::string::npos) {
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() + slash) {
      const long long n = std::strtoll(s.c_str() + slash + 1, &end, 10);
      if (*end == '\0' && slash + 1 < s.size() && n >= 1 && i >= 0 && i < n) return std::pair<int64_t, int64_t>(i, n);
    }
  }
  return Error{"--shard '" + s + "': expected I/N with 0 <= I < N, e.g. --shard 0/4 (Slurm: $SLURM_ARRAY_TASK_ID/N)"};
}

po::options_description sweep_options() {
  po::options_description sweep("Options of `sim sweep`");
  // clang-format off
  sweep.add_options()
    ("file", po::value<std::string>()->value_name("SWEEP.toml"), "a sweep file: name, log, [fixed] and [grid] (positional)")
    ("grid", po::value<std::vector<std::string>>()->value_name("KEY=V1,V2")->composing(),
     "a key and its values; repeatable (the last key varies fastest)")
    ("jobs,j", po::value<int>()->value_name("N"), "points run at once (default: the cores)")
    ("resume", po::value<int64_t>()->value_name("ID"), "rerun the points of sweep ID that are not done (an interrupted sweep)")
    ("shard", po::value<std::string>()->value_name("I/N"), "run only the points p with p % N == I (for array jobs)")
    ("dry-run", "check the sweep and print its points (JSON: db, points, keys) without running or writing anything");
  // clang-format on
  return sweep;
}

// --resume ID: the stored sweep's definition, as it was; `options` learn its id and kind.
Result<SweepSpec> resumed_spec(const po::variables_map& vm, SweepOptions& options) {
  if (vm.count("grid") || vm.count("file")) return Error{"--resume reruns a stored sweep; it takes no grid or sweep file"};
  // Every run option would be dropped: the stored definition is what resumes.
  const po::options_description run = run_options();
  for (const auto& option : run.options()) {
    const std::string name = option->long_name();
    // A switch (--enforce-eager) is always in vm, false unless given.
    if (name != "db" && name != "help" && name != "quiet" && vm.count(name) != 0 && !vm[name].defaulted()) {
      return Error{"--resume reruns the sweep as it was defined; it takes no run options (--" + name +
                   "): start a new sweep for another configuration"};
    }
  }
  const std::string db_path = vm.count("db") ? vm["db"].as<std::string>() : RunConfig{}.db;
  auto db = Database::open_read_only(db_path);
  if (!db.ok()) return db.error();
  auto stored = read_sweep(*db.value(), vm["resume"].as<int64_t>());
  if (!stored.ok()) return stored.error();
  if (stored.value().kind == "search") {
    return Error{"sweep " + std::to_string(stored.value().id) + " is a search, whose probes depend on the "
                 "answers before them: run the search again rather than resuming it"};
  }
  auto parsed = parse_sweep_spec(stored.value().spec, db_path + ": sweep " + std::to_string(stored.value().id),
                                 stored.value().keys);
  if (!parsed.ok()) return parsed.error();
  SweepSpec spec = std::move(parsed).value();
  if (Status s = check_no_shadowed_presets(spec); !s.ok()) return s.error();
  spec.fixed.insert_or_assign("db", db_path);
  options.resume_id = stored.value().id;
  options.kind = stored.value().kind;
  return spec;
}

// A new sweep: the sweep file's, with the flags' fixed values and grid.
Result<SweepSpec> new_spec(const po::variables_map& vm, std::ostream& err) {
  SweepSpec spec;
  if (vm.count("file")) {
    auto loaded = load_sweep_file(vm["file"].as<std::string>());
    if (!loaded.ok()) return loaded.error();
    spec = std::move(loaded).value();
  }
  Result<toml::table> flags = config_table_from_flags(vm);
  if (!flags.ok()) return flags.error();
  merge_into(spec.fixed, flags.value());
  // --name names the sweep; its points are named after it and their values.
  if (const auto* name = spec.fixed.get_as<std::string>("name")) {
    spec.name = name->get();
    spec.fixed.erase("name");
  }
  if (vm.count("grid")) {
    for (const std::string& token : vm["grid"].as<std::vector<std::string>>()) {
      auto axis = parse_grid_flag(token);
      if (!axis.ok()) return axis.error();
      if (Status s = add_grid_flag(spec, std::move(axis).value()); !s.ok()) return s.error();
    }
  }
  absolutize_paths(spec, "");  // a resume from another folder runs the same files
  note_overridden_keys(spec, err);
  return spec;
}

// The measuring engines time real work: points side by side would slow each other down.
void one_at_a_time_if_measuring(const SweepSpec& spec, SweepOptions& options, std::ostream& err) {
  if (options.jobs <= 1) return;
  bool measuring = false;
  for (const SweepAxis& a : spec.grid) {
    if (a.key != "backend") continue;
    for (const toml::node& v : a.values) measuring = measuring || is_measuring_backend(v.value_or(std::string()));
  }
  if (const auto* b = spec.fixed.get_as<std::string>("backend")) measuring = measuring || is_measuring_backend(b->get());
  if (measuring) {
    err << "sim sweep: note: the cpu and cuda engines measure real time, so their points run one at a time\n";
    options.jobs = 1;
  }
}

// The sweep's table and tally, and its exit status (with how to finish it when it stopped short).
int print_sweep_outcome(const SweepResult& r, double wall, int jobs, std::ostream& out, std::ostream& err) {
  if (Status s = print_sweep_report(r.db_path, r.sweep_id, ReportFormat::kText, out); !s.ok()) {
    err << "sim sweep: " << s.error().message << "\n";
  }
  int64_t done = 0, failed = 0, interrupted = 0;
  for (const PointOutcome& o : r.points) {
    (o.status == "done" ? done : o.status == "interrupted" ? interrupted : failed) += 1;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%zu points run in %.2f s with %d jobs: %lld done, %lld failed, %lld interrupted",
                r.points.size(), wall, jobs, static_cast<long long>(done),
                static_cast<long long>(failed), static_cast<long long>(interrupted));
  out << line << (r.skipped ? "; " + std::to_string(r.skipped) + " skipped (done already, or other shards)" : "")
      << ". Sweep " << r.sweep_id << " in " << r.db_path << "\n";
  const std::string resume = "sim sweep --resume " + std::to_string(r.sweep_id) + " --db " + r.db_path +
                             (r.shard.empty() ? "" : " --shard " + r.shard);
  if (!r.storage_error.empty()) {
    err << "sim sweep: " << r.storage_error << "\nsim sweep: the points not written are to be run again: make room, "
        << "then: " << resume << "\n";
    return kExitFailed;
  }
  if (r.interrupted) {
    err << "sim sweep: interrupted; finish it with: " << resume << "\n";
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace

int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description all;
  all.add(sweep_options()).add(run_options());
  po::positional_options_description positional;
  positional.add("file", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "sim sweep: " << e.what() << "\nTry 'sim sweep --help'.\n";
    return kExitBadInput;
  }
  if (vm.count("help") != 0) {
    print_sweep_help(out, all);
    return kExitOk;
  }
  auto bad = [&](const std::string& message) {
    err << "sim sweep: " << message << "\n";
    return kExitBadInput;
  };
  const StopSignals stop;
  SweepOptions options;
  options.jobs = vm.count("jobs") ? vm["jobs"].as<int>() : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.jobs < 1 || options.jobs > 1024) return bad("--jobs: expected 1 to 1024, got " + std::to_string(options.jobs));
  options.stop = stop.flag();
  if (vm.count("shard")) {
    auto shard = parse_shard(vm["shard"].as<std::string>());
    if (!shard.ok()) return bad(shard.error().message);
    options.shard = shard.value();
  }
  Result<SweepSpec> made = vm.count("resume") ? resumed_spec(vm, options) : new_spec(vm, err);
  if (!made.ok()) return bad(made.error().message);
  const SweepSpec& spec = made.value();
  if (Status s = check_sweep(spec); !s.ok()) return bad(s.error().message);
  if (vm.count("dry-run")) {
    // For drivers (scripts/ray_sweep.py): what would run, as one JSON line.
    nlohmann::json plan = {{"db", sweep_db_path(spec)}, {"points", spec.num_points()}, {"keys", spec.keys()},
                           {"spec", spec.to_toml()}};
    out << plan.dump() << "\n";
    return kExitOk;
  }
  one_at_a_time_if_measuring(spec, options, err);
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto started = std::chrono::steady_clock::now();
  options.on_point = [&](const PointOutcome& o, int64_t done, int64_t total) {
    if (tty) {
      err << "\r[" << done << "/" << total << "] point " << o.point << " " << o.status << "   " << std::flush;
    }
  };
  Result<SweepResult> ran = run_sweep(spec, options);
  if (tty) err << "\r" << std::string(60, ' ') << "\r";
  if (!ran.ok()) {
    if (!ran.error().storage) return bad(ran.error().message);
    err << "sim sweep: " << ran.error().message << "\n";  // a full disk: not the input's fault
    return kExitFailed;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return print_sweep_outcome(ran.value(), wall, options.jobs, out, err);
}

}  // namespace servesim

namespace servesim {

int merge_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> sources;
  std::string into;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      out << "Usage: sim merge A.db B.db ... --into ALL.db\n"
             "Appends the runs of several databases (the shards of a sweep, Ray workers' files) to\n"
             "one, renumbering run ids; the points of one sweep from several files join one sweep.\n"
             "Each source goes in one transaction, and a run already in the target is not copied\n"
             "again: a merge that stopped (Ctrl-C, a full disk) is finished by running it again.\n";
      return kExitOk;
    }
    if (args[i] == "--into") {
      if (i + 1 >= args.size()) {
        err << "sim merge: --into needs a file\n";
        return kExitBadInput;
      }
      into = args[++i];
    } else if (!args[i].empty() && args[i][0] == '-') {
      err << "sim merge: unknown option " << args[i] << "\nTry 'sim merge --help'.\n";
      return kExitBadInput;
    } else {
      sources.push_back(args[i]);
    }
  }
  if (into.empty()) {
    err << "sim merge: give the target with --into FILE\n";
    return kExitBadInput;
  }
  const StopSignals stop;
  Result<MergeOutcome> merged = merge_databases(sources, into, out, stop.flag());
  if (!merged.ok()) {
    err << "sim merge: " << merged.error().message << "\n";
    if (merged.error().storage) {
      err << "sim merge: run the same command again to finish: runs already merged are not copied twice\n";
      return kExitFailed;
    }
    return kExitBadInput;
  }
  if (merged.value().interrupted) {
    err << "sim merge: interrupted; " << merged.value().merged.size() << " of " << sources.size()
        << " sources merged, the one in progress rolled back. Run the same command again to finish: runs "
           "already merged are not copied twice\n";
    return kExitInterrupted;
  }
  return kExitOk;
}

}  // namespace servesim
