// `sim search`: the largest rate under SLOs, or the cheapest configuration of a grid that carries a
// rate (runner/search.h).
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include <boost/program_options.hpp>

#include "cli/cli.h"
#include "runner/external_probes.h"
#include "runner/search.h"
#include "cli/stop_signals.h"
#include "sim/config/toml_fields.h"

namespace servesim {
namespace po = boost::program_options;

namespace {

void print_search_help(std::ostream& out, const po::options_description& o) {
  out << "Usage: sim search --slo KEY=VALUE... [run options]                 the largest request rate\n"
         "       sim search --slo KEY=VALUE... --grid KEY=V1,V2... [--request-rate R] [--minimize WHAT]\n"
         "                                                          the cheapest configuration\n"
         "Answers a capacity question in one command, running only the probes the answer needs (an\n"
         "exponential then k-ary search on the rate; a binary search on replicas per combination of\n"
         "the other keys). A probe passes when it is not overloaded, rejects no request (unless\n"
         "--slo rejected=SHARE allows some) and meets every SLO; a configuration that fails, or\n"
         "rejects requests, is not probed further. Every probe is recorded in the database as a point\n"
         "of one search (sim report --sweep). A round runs -j probes at once; scripts/ray_search.py\n"
         "runs each round's probes on a Ray cluster. Prices: --price-by gpu (default) | node.\n\n"
      << o
      << "\nExamples:\n"
         "  sim search --trace azure-conv.csv --policy chunked-prefill --slo p99_ttft=2s --slo rejected=0.001\n"
         "  sim search --trace azure-conv.csv --model llama-3.1-70b --policy chunked-prefill --rate-scale 3 \\\n"
         "      --slo p99_ttft=1.5s --slo p99_tpot=80ms --grid hardware=a100-80gb,h100-sxm,h200 --grid tp=4,8 \\\n"
         "      --grid replicas=1,2,3,4,6,8,12,16 --minimize cost_per_hour --price-by node\n"
         "  sim search --config pd.toml --slo p99_ttft=10s --grid 'replicas[0].count=3,4,5' \\\n"
         "      --grid 'replicas[1].tp=4,8'          # a disaggregated deployment's pools (docs/planning.md)\n";
}

std::string value_text(const toml::node* n) { return n == nullptr ? "-" : plain_value(*n); }

std::string metric_text(const PointOutcome& o, const char* name, double scale, const char* fmt) {
  const std::optional<double> v = find_metric(o.metrics, name);
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, *v * scale);
  return buf;
}

void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      const bool last = i + 1 == r.size();
      line += r[i] + (last ? "" : std::string(width[i] - r[i].size() + 2, ' '));
    }
    out << line << '\n';
  }
}

// The share of requests the probe rejected: "0", "45.0%".
std::string rejected_text(const PointOutcome& o) {
  const std::optional<double> rejected = find_metric(o.metrics, "rejected");
  if (!rejected) return "-";
  const double total = *rejected + find_metric(o.metrics, "completed").value_or(0);
  if (*rejected == 0 || total == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g%%", *rejected / total * 100);  // 1 of 19,366: 0.00516%, not 0.0%
  return buf;
}

std::vector<std::string> probe_cells(const SearchProbe& p) {
  const PointOutcome& o = p.outcome;
  return {metric_text(o, "gpus", 1, "%.0f"),         metric_text(o, "nodes", 1, "%.0f"),
          metric_text(o, "request_throughput", 1, "%.2f"),
          metric_text(o, "ttft_p99", 1e3, "%.1f"),   metric_text(o, "tpot_p99", 1e3, "%.1f"),
          metric_text(o, "e2el_p99", 1e3, "%.0f"),   rejected_text(o),
          metric_text(o, "cost_per_hour", 1, "%.2f"), p.miss.empty() ? "pass" : "miss: " + p.miss};
}

const std::vector<std::string> kProbeHeaders = {"gpus", "nodes", "req/s", "p99_ttft_ms", "p99_tpot_ms",
                                                "p99_e2el_ms", "rejected", "usd/hour", "verdict"};

po::options_description search_options() {
  po::options_description search("Options of `sim search`");
  // clang-format off
  search.add_options()
    ("slo", po::value<std::vector<std::string>>()->value_name("KEY=VALUE")->composing(),
     "an objective; repeatable: p99_ttft=2s, p50_tpot=100ms, mean_e2el=10s ({mean,p50,p90,p99}_{ttft,tpot,itl,e2el,queue}), slo_attainment=0.99 (with --goodput), rejected=0.01 (share)")
    ("grid", po::value<std::vector<std::string>>()->value_name("KEY=V1,V2")->composing(),
     "search the cheapest configuration over these values (replicas is searched, the others enumerated)")
    ("minimize", po::value<std::string>()->value_name("WHAT"),
     "with --grid: gpus (default) | nodes (whole nodes of the hardware's gpus_per_node) | cost_per_hour | "
     "cost_per_million_output_tokens (priced by GPU, or by node with --price-by node)")
    ("start-rate", po::value<double>()->value_name("R"), "without --grid: the first rate probed (default 1 req/s)")
    ("precision", po::value<double>()->value_name("F"), "without --grid: stop when the rate is known within F (default 0.01)")
    ("jobs,j", po::value<int>()->value_name("N"), "probes per round, run at once (default: the cores)")
    ("probes-external", "let the process that started this one run each round's probes (scripts/ray_search.py "
     "runs them on Ray): a request line on stdout, the answer on stdin (runner/external_probes.h)");
  // clang-format on
  return search;
}

// The flags' search: the fixed configuration, the SLOs, the grid and the search's own settings.
Result<SearchSpec> read_search_flags(const po::variables_map& vm) {
  SearchSpec spec;
  Result<toml::table> flags = config_table_from_flags(vm);
  if (!flags.ok()) return flags.error();
  spec.fixed = std::move(flags).value();
  if (const auto* name = spec.fixed.get_as<std::string>("name")) {
    spec.name = name->get();
    spec.fixed.erase("name");
  }
  if (vm.count("slo")) {
    for (const std::string& token : vm["slo"].as<std::vector<std::string>>()) {
      auto slo = parse_slo(token);
      if (!slo.ok()) return slo.error();
      spec.slos.push_back(slo.value());
    }
  }
  if (vm.count("grid")) {
    for (const std::string& token : vm["grid"].as<std::vector<std::string>>()) {
      auto axis = parse_grid_flag(token);
      if (!axis.ok()) return axis.error();
      spec.grid.push_back(std::move(axis).value());
    }
  }
  if (vm.count("minimize")) {
    spec.minimize = vm["minimize"].as<std::string>();
    if (spec.minimize != "gpus" && spec.minimize != "nodes" && spec.minimize != "cost_per_hour" &&
        spec.minimize != "cost_per_million_output_tokens") {
      return Error{"--minimize '" + spec.minimize +
                   "': expected gpus, nodes, cost_per_hour or cost_per_million_output_tokens"};
    }
    if (spec.grid.empty()) return Error{"--minimize chooses among the configurations of a --grid"};
  }
  if (vm.count("start-rate")) spec.start_rate = vm["start-rate"].as<double>();
  if (vm.count("precision")) spec.precision = vm["precision"].as<double>();
  return spec;
}

// Flags that belong to the other kind of search.
Status check_search_kind(const SearchSpec& spec, const po::variables_map& vm) {
  if (!spec.grid.empty() && (vm.count("start-rate") || vm.count("precision"))) {
    return Error{"--start-rate and --precision belong to the rate search (without --grid)"};
  }
  for (const char* scale : {"time_scale", "rate_scale"}) {
    if (spec.grid.empty() && spec.fixed.contains(scale)) {
      return Error{std::string("--") + (scale[0] == 't' ? "time-scale" : "rate-scale") +
                   ": the rate search chooses the rate itself; give a --grid to find the cheapest configuration "
                   "at a scaled rate"};
    }
  }
  if (spec.grid.empty() && spec.fixed.contains("request_rate")) {
    return Error{"--request-rate: the rate search chooses the rate; give a --grid to find the cheapest "
                 "configuration for that rate"};
  }
  return Ok{};
}

// The files it names, by absolute path (a probe run on another machine, or from another folder,
// finds the same ones); and the fixed values the grid replaces, said.
void absolutize_search(SearchSpec& spec, std::ostream& err) {
  SweepSpec files{spec.name, "summary", std::move(spec.fixed), std::move(spec.grid)};
  absolutize_paths(files, "");
  for (const std::string& key : overridden_keys(files)) {
    err << "sim search: note: the grid replaces " << key << " of the fixed configuration in every probe\n";
  }
  spec.fixed = std::move(files.fixed);
  spec.grid = std::move(files.grid);
}

// The search of the flags, checked.
Result<SearchSpec> search_spec(const po::variables_map& vm, std::ostream& err) {
  Result<SearchSpec> spec = read_search_flags(vm);
  if (!spec.ok()) return spec;
  if (Status s = check_search_kind(spec.value(), vm); !s.ok()) return s.error();
  absolutize_search(spec.value(), err);
  if (Status s = check_search(spec.value()); !s.ok()) return s.error();
  return spec;
}

std::vector<std::string> header_with_probes(std::vector<std::string> header) {
  header.insert(header.end(), kProbeHeaders.begin(), kProbeHeaders.end());
  return header;
}

// A rate search's probes, by rate.
std::vector<std::vector<std::string>> rate_rows(const SearchResult& r) {
  std::vector<const SearchProbe*> sorted;
  for (const SearchProbe& p : r.probes) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(), [](const SearchProbe* a, const SearchProbe* b) {
    return a->values[0]->value_or(0.0) < b->values[0]->value_or(0.0);
  });
  std::vector<std::vector<std::string>> rows = {header_with_probes({"probe", "request_rate"})};
  for (const SearchProbe* p : sorted) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.4g", p->values[0]->value_or(0.0));
    std::vector<std::string> row = {std::to_string(p->point), rate};
    for (std::string& c : probe_cells(*p)) row.push_back(std::move(c));
    rows.push_back(std::move(row));
  }
  return rows;
}

// One combination: its probes, by the swept values.
std::vector<std::vector<std::string>> combination_rows(const SearchResult& r) {
  std::vector<std::vector<std::string>> rows = {header_with_probes(r.keys)};
  std::vector<const SearchProbe*> sorted;
  for (const SearchProbe& p : r.probes) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(), [](const SearchProbe* a, const SearchProbe* b) {
    for (size_t i = 0; i < a->values.size(); ++i) {
      const double x = a->values[i]->value_or(0.0), y = b->values[i]->value_or(0.0);
      const double xi = static_cast<double>(a->values[i]->value_or(int64_t{0}));
      const double yi = static_cast<double>(b->values[i]->value_or(int64_t{0}));
      if (x + xi != y + yi) return x + xi < y + yi;
    }
    return false;
  });
  for (const SearchProbe* p : sorted) {
    std::vector<std::string> row;
    for (const toml::node* v : p->values) row.push_back(value_text(v));
    for (std::string& c : probe_cells(*p)) row.push_back(std::move(c));
    rows.push_back(std::move(row));
  }
  return rows;
}

// The frontier's row `f`: the combination's fewest replicas that pass.
std::vector<std::string> frontier_cells(const SearchResult& r, const SearchResult::FrontierRow& f) {
  std::vector<std::string> row = {f.label};
  if (f.probe < 0) {
    row.push_back("-");
    for (size_t i = 0; i + 1 < kProbeHeaders.size(); ++i) row.push_back("-");
    row.push_back(f.note);
    return row;
  }
  const SearchProbe& p = r.probes[static_cast<size_t>(f.probe)];
  std::string replicas = "-";
  for (size_t i = 0; i < r.keys.size(); ++i) {
    if (r.keys[i] == "replicas") replicas = value_text(p.values[i]);
  }
  // Fewer replicas were not run (they could not beat the best): this count is an upper bound.
  row.push_back(f.untried.empty() ? replicas : "<=" + replicas);
  for (std::string& c : probe_cells(p)) row.push_back(std::move(c));
  if (!f.untried.empty()) {
    row.back() += " (" + f.untried + " not run: " + (f.note.empty() ? "cannot beat the best" : f.note) + ")";
  }
  return row;
}

// The search's table: a rate search's probes, one combination's probes, or the frontier.
std::vector<std::vector<std::string>> result_rows(const SearchSpec& spec, const SearchResult& r) {
  if (spec.grid.empty()) return rate_rows(r);
  if (r.frontier.size() == 1) return combination_rows(r);
  std::vector<std::vector<std::string>> rows = {header_with_probes({"configuration", "replicas"})};
  for (const SearchResult::FrontierRow& f : r.frontier) rows.push_back(frontier_cells(r, f));
  return rows;
}

// The search's exit status, and why it failed, on `err`.
int search_exit(const SearchResult& r, std::ostream& err) {
  if (!r.storage_error.empty()) {
    err << "sim search: " << r.storage_error << "\n";
    return kExitFailed;
  }
  if (!r.executor_error.empty()) {
    err << "sim search: " << r.executor_error << "\n";
    return kExitFailed;
  }
  if (r.interrupted) return kExitInterrupted;
  return kExitOk;
}

}  // namespace

int search_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  po::options_description all;
  all.add(search_options()).add(run_options());
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "sim search: " << e.what() << "\nTry 'sim search --help'.\n";
    return kExitBadInput;
  }
  if (vm.count("help") != 0) {
    print_search_help(out, all);
    return kExitOk;
  }
  auto bad = [&](const std::string& message) {
    err << "sim search: " << message << "\n";
    return kExitBadInput;
  };
  const StopSignals stop;
  Result<SearchSpec> checked = search_spec(vm, err);
  if (!checked.ok()) return bad(checked.error().message);
  const SearchSpec& spec = checked.value();
  SearchOptions options;
  options.jobs = vm.count("jobs") ? vm["jobs"].as<int>() : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.jobs < 1 || options.jobs > 1024) return bad("--jobs: expected 1 to 1024");
  options.stop = stop.flag();
  if (vm.count("probes-external") != 0) {
    std::signal(SIGPIPE, SIG_IGN);  // a driver gone away fails the write, which says so
    options.execute = external_probe_executor(stream_channel(out, STDIN_FILENO, stop.flag()));
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  options.on_probe = [&](const SearchProbe& p) {
    if (tty) err << "\rprobe " << p.point << ": " << (p.miss.empty() ? "pass" : "miss") << "      " << std::flush;
  };
  const auto started = std::chrono::steady_clock::now();
  Result<SearchResult> ran = run_search(spec, options);
  if (tty) err << "\r" << std::string(40, ' ') << "\r";
  if (!ran.ok()) {
    if (!ran.error().storage) return bad(ran.error().message);
    err << "sim search: " << ran.error().message << "\n";
    return kExitFailed;
  }
  const SearchResult& r = ran.value();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  print_table(out, result_rows(spec, r));
  char line[200];
  std::snprintf(line, sizeof line, "%zu probes in %.2f s with %d jobs; search %lld in %s\n", r.probes.size(),
                wall, options.jobs, static_cast<long long>(r.sweep_id), r.db_path.c_str());
  out << line << "Answer: " << r.answer << "\n";
  return search_exit(r, err);
}

}  // namespace servesim
