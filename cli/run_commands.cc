// The commands that read a logged run back: `sim report`, `sim validate` and `sim calibrate`. They
// share their options (--db, --run, --help) and their error handling.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "analysis/calibration/calibrate.h"
#include "analysis/reports/compare.h"
#include "analysis/reports/html_report.h"
#include "analysis/calibration/measured.h"
#include "analysis/calibration/measured_report.h"
#include "analysis/reports/report.h"
#include "analysis/reports/sweep_report.h"
#include "analysis/calibration/validate.h"
#include "sim/config/config.h"
#include "cli/cli.h"
#include "sim/io/output_file.h"
#include "sim/config/presets.h"

namespace servesim {
namespace po = boost::program_options;
namespace {

struct Command {
  const char* name;   // "report"
  const char* usage;  // the usage line and what the command does
};

// many_runs: --run may be repeated (`sim report --html` compares runs).
po::options_description read_options(const Command& c, bool many_runs = false) {
  po::options_description o(std::string("Options of `sim ") + c.name + "`");
  po::value_semantic* run = many_runs
      ? static_cast<po::value_semantic*>(po::value<std::vector<int64_t>>()->value_name("ID")->composing())
      : po::value<int64_t>()->value_name("ID");
  o.add_options()("db", po::value<std::string>()->default_value("sim.db")->value_name("FILE"),
                  "database to read")(
      "run", run, many_runs ? "run id (default: the latest run); repeat to compare runs (--html)"
                            : "run id (default: the latest run)")(
      "help,h", "show this help");
  return o;
}

// Parses the arguments; returns an exit status when the command is already done (bad options, or
// --help), nothing when it should go on.
std::optional<int> parse(const Command& c, const std::vector<std::string>& args,
                         const po::options_description& o, po::variables_map& vm,
                         std::ostream& out, std::ostream& err) {
  try {
    po::store(po::command_line_parser(args).options(o).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "sim " << c.name << ": " << e.what() << "\nTry 'sim " << c.name << " --help'.\n";
    return kExitBadInput;
  }
  if (vm.count("help") != 0) {
    out << c.usage << "\n" << o;
    return kExitOk;
  }
  return std::nullopt;
}

std::optional<int64_t> run_id(const po::variables_map& vm) {
  if (vm.count("run") == 0) return std::nullopt;
  return vm["run"].as<int64_t>();
}

// The exit status of a command that ended with s: 0, 1 when writing `written` failed (the disk, not
// the input), else 2.
int finish(const Command& c, const Status& s, std::ostream& err, const OutputFile* written = nullptr) {
  if (s.ok()) return kExitOk;
  err << "sim " << c.name << ": " << s.error().message << "\n";
  return written != nullptr && written->write_failed() ? kExitFailed : kExitBadInput;
}

}  // namespace

int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const Command c{"report",
                  "Usage: sim report [--db FILE] [--run ID | --sweep [ID]] [--format text|json|csv|vllm-json]\n"
                  "                  [--metric-percentiles 25,50,99] [--bootstrap N [--seed N] [-j N]]\n"
                  "       sim report [--db FILE] [--run ID ... | --sweep [ID]] --html FILE\n"
                  "Prints a logged run's summary metrics, or a sweep's or search's table; with --html,\n"
                  "writes one self-contained page of charts (opens offline) for a run, several runs\n"
                  "compared (--run 3 --run 7), or a sweep. --format vllm-json writes the run as\n"
                  "`vllm bench serve --save-result` does. --bootstrap N resamples the run's requests for\n"
                  "95 % intervals of its latencies and throughputs (the run needs its requests rows).\n"};
  po::options_description o = read_options(c, /*many_runs=*/true);
  o.add_options()("format", po::value<std::string>()->default_value("text")->value_name("FMT"),
                  "text | json | csv | vllm-json")(
      "metric-percentiles", po::value<std::string>()->value_name("LIST"),
      "percentiles printed (text, vllm-json) as vLLM bench's: 25,50,99 (default: the run's own, else 90,99; vllm-json 99)")(
      "sweep", po::value<int64_t>()->implicit_value(0)->value_name("ID"),
      "a sweep's or search's table (default: the latest)")(
      "html", po::value<std::string>()->value_name("FILE"), "write an HTML report with charts to FILE")(
      "bootstrap", po::value<int64_t>()->value_name("N"),
      "resample the run's requests N times (10 to 100000; 1000 is usual) and add each latency and throughput "
      "metric's 95 % percentile-bootstrap interval (text, json, html)")(
      "seed", po::value<int64_t>()->default_value(0)->value_name("N"), "with --bootstrap: the resamples' seed")(
      "jobs,j", po::value<int>()->value_name("N"), "with --bootstrap: threads (default: the cores)");
  po::variables_map vm;
  if (auto done = parse(c, args, o, vm, out, err)) return *done;
  std::optional<BootstrapOptions> bootstrap;
  if (vm.count("bootstrap") != 0) {
    if (vm["seed"].as<int64_t>() < 0) return finish(c, Error{"--seed: expected a number >= 0"}, err);
    Result<BootstrapOptions> b = bootstrap_options(vm, static_cast<uint64_t>(vm["seed"].as<int64_t>()));
    if (!b.ok()) return finish(c, b.error(), err);
    if (vm.count("sweep") != 0) return finish(c, Error{"--bootstrap resamples one run's requests: give --run ID, not --sweep"}, err);
    bootstrap = b.value();
  } else if (!vm["seed"].defaulted() || vm.count("jobs") != 0) {
    return finish(c, Error{"--seed and --jobs go with --bootstrap"}, err);
  }
  Result<ReportFormat> format = parse_report_format(vm["format"].as<std::string>());
  if (!format.ok()) return finish(c, Error{"--format: " + format.error().message}, err);
  std::vector<double> percentiles;
  if (vm.count("metric-percentiles") != 0) {
    Result<std::vector<double>> p = parse_percentile_list(vm["metric-percentiles"].as<std::string>());
    if (!p.ok()) return finish(c, Error{"--metric-percentiles: " + p.error().message}, err);
    percentiles = p.value();
  }
  const std::vector<int64_t> runs =
      vm.count("run") ? vm["run"].as<std::vector<int64_t>>() : std::vector<int64_t>{};
  if (vm.count("sweep") != 0 && !runs.empty()) return finish(c, Error{"give --run or --sweep, not both"}, err);
  if (vm.count("html") != 0) {
    if (format.value() != ReportFormat::kText) {
      const std::string f = vm["format"].as<std::string>();
      return finish(c, Error{"--html writes a page; --format " + f + " does not apply to it"}, err);
    }
    HtmlReportOptions html{.db_path = vm["db"].as<std::string>(), .run_ids = runs, .bootstrap = bootstrap};
    if (vm.count("sweep") != 0) html.sweep_id = vm["sweep"].as<int64_t>();
    OutputFile file("--html", vm["html"].as<std::string>(), {{"--db", html.db_path}});
    return finish(c, write_html_report(html, file, out), err, &file);
  }
  if (runs.size() > 1) return finish(c, Error{"give one --run, or use --html / sim compare"}, err);
  if (vm.count("sweep") != 0) {
    if (format.value() == ReportFormat::kVllmJson) {
      return finish(c, Error{"--format vllm-json describes one run; give --run ID (a sweep's runs are in sim list runs)"}, err);
    }
    const int64_t id = vm["sweep"].as<int64_t>();
    return finish(c, print_sweep_report(vm["db"].as<std::string>(),
                                        id > 0 ? std::optional<int64_t>(id) : std::nullopt,
                                        format.value(), out),
                  err);
  }
  const std::optional<int64_t> run = runs.empty() ? std::nullopt : std::optional<int64_t>(runs[0]);
  return finish(c, print_report(vm["db"].as<std::string>(), run, format.value(), out, percentiles, bootstrap), err);
}

int compare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const Command c{"compare",
                  "Usage: sim compare RUN RUN ... [--db FILE] [--format text|csv|json]\n"
                  "The runs' metrics side by side, each run after the first with its difference from\n"
                  "the first, absolute and relative. `sim list runs` lists the runs.\n"};
  po::options_description o(std::string("Options of `sim compare`"));
  o.add_options()("db", po::value<std::string>()->default_value("sim.db")->value_name("FILE"), "database to read")(
      "format", po::value<std::string>()->default_value("text")->value_name("FMT"), "text | csv | json")(
      "runs", po::value<std::vector<int64_t>>()->value_name("RUN")->multitoken(), "run ids")(
      "help,h", "show this help");
  po::positional_options_description positional;
  positional.add("runs", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(o).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "sim compare: " << e.what() << "\nTry 'sim compare --help'.\n";
    return kExitBadInput;
  }
  if (vm.count("help") != 0) {
    out << c.usage << "\n" << o;
    return kExitOk;
  }
  Result<ReportFormat> format = parse_report_format(vm["format"].as<std::string>());
  if (!format.ok()) return finish(c, Error{"--format: " + format.error().message}, err);
  const std::vector<int64_t> runs = vm.count("runs") ? vm["runs"].as<std::vector<int64_t>>() : std::vector<int64_t>{};
  return finish(c, print_comparison(vm["db"].as<std::string>(), runs, format.value(), out), err);
}

int list_runs_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const Command c{"list runs", "Usage: sim list runs [--db FILE] [--format text|csv|json]\nEvery run of the database, oldest first.\n"};
  po::options_description o(std::string("Options of `sim list runs`"));
  o.add_options()("db", po::value<std::string>()->default_value("sim.db")->value_name("FILE"), "database to read")(
      "format", po::value<std::string>()->default_value("text")->value_name("FMT"), "text | csv | json")(
      "help,h", "show this help");
  po::variables_map vm;
  if (auto done = parse(c, args, o, vm, out, err)) return *done;
  Result<ReportFormat> format = parse_report_format(vm["format"].as<std::string>());
  if (!format.ok()) return finish(c, Error{"--format: " + format.error().message}, err);
  return finish(c, print_run_list(vm["db"].as<std::string>(), format.value(), out), err);
}

namespace {

// The measured timings named by --measured, with the GPU and model to price them on: a Vidur
// profile folder's path implies both (vidur_presets); a CSV names neither.
Result<MeasuredRequest> measured_request(const po::variables_map& vm) {
  if (vm.count("run") != 0 || !vm["db"].defaulted()) {
    return Error{"--measured compares measured timings, not a run: leave out --db and --run"};
  }
  MeasuredRequest r;
  r.path = vm["measured"].as<std::string>();
  const VidurPresets implied = vidur_presets(r.path);
  auto resolve = [&](const char* option, const std::string& implied_name,
                     PresetKind kind) -> Result<std::string> {
    const std::string name = std::string("--") + option;
    if (vm.count(option) != 0) return resolve_preset(vm[option].as<std::string>(), kind, name);
    if (implied_name.empty()) {
      return Error{name + " is required: " + r.path +
                   " does not say which " + (kind == PresetKind::kHardware ? "GPU" : "model") +
                   " it was measured on"};
    }
    return resolve_preset(implied_name, kind, name);
  };
  Result<std::string> hw = resolve("hardware", implied.hardware, PresetKind::kHardware);
  if (!hw.ok()) return hw.error();
  Result<std::string> model = resolve("model", implied.model, PresetKind::kModel);
  if (!model.ok()) return model.error();
  r.hardware_path = hw.value();
  r.model_path = model.value();
  const int64_t tp = vm["tp"].as<int64_t>();
  if (tp < 1 || tp > 4096) return Error{"--tp: expected an integer from 1 to 4096, got " + std::to_string(tp)};
  r.tp = static_cast<int32_t>(tp);
  return r;
}

// `sim calibrate --measured PATH ...`: the sources, each with its model and tp (--model and --tp once
// for all or once per --measured; a Vidur folder implies its model), and the one GPU they were
// measured on (--hardware, or the one every Vidur folder implies).
Result<std::vector<MeasuredProfile>> measured_profiles(const po::variables_map& vm, std::string& hardware_path) {
  if (vm.count("run") != 0 || !vm["db"].defaulted()) {
    return Error{"--measured compares measured timings, not a run: leave out --db and --run"};
  }
  const auto paths = vm["measured"].as<std::vector<std::string>>();
  const auto models = vm.count("model") != 0 ? vm["model"].as<std::vector<std::string>>() : std::vector<std::string>{};
  const auto tps = vm.count("tp") != 0 ? vm["tp"].as<std::vector<int64_t>>() : std::vector<int64_t>{};
  for (const auto& [name, given] : {std::pair<const char*, size_t>{"--model", models.size()}, {"--tp", tps.size()}}) {
    if (given > 1 && given != paths.size()) {
      return Error{std::string(name) + " is given " + std::to_string(given) + " times for " + std::to_string(paths.size()) +
                   " --measured: give it once (for all) or once per --measured, in their order"};
    }
  }
  std::string implied_hardware;
  std::vector<MeasuredProfile> sources;
  for (size_t k = 0; k < paths.size(); ++k) {
    MeasuredProfile source;
    source.path = paths[k];
    const VidurPresets implied = vidur_presets(source.path);
    if (vm.count("hardware") == 0) {
      if (implied.hardware.empty()) {
        return Error{"--hardware is required: " + source.path + " does not say which GPU it was measured on"};
      }
      if (!implied_hardware.empty() && implied.hardware != implied_hardware) {
        return Error{"--measured: " + source.path + " was measured on " + implied.hardware + ", " + paths[0] +
                     " on " + implied_hardware + "; one fit is of one GPU"};
      }
      implied_hardware = implied.hardware;
    }
    const std::string model = models.empty() ? implied.model : models[models.size() == 1 ? 0 : k];
    if (model.empty()) return Error{"--model is required: " + source.path + " does not say which model it measured"};
    Result<std::string> model_path = resolve_preset(model, PresetKind::kModel, "--model");
    if (!model_path.ok()) return model_path.error();
    source.model_path = model_path.value();
    const int64_t tp = tps.empty() ? 1 : tps[tps.size() == 1 ? 0 : k];
    if (tp < 1 || tp > 4096) return Error{"--tp: expected an integer from 1 to 4096, got " + std::to_string(tp)};
    source.tp = static_cast<int32_t>(tp);
    sources.push_back(std::move(source));
  }
  Result<std::string> hw = resolve_preset(vm.count("hardware") != 0 ? vm["hardware"].as<std::string>() : implied_hardware,
                                          PresetKind::kHardware, "--hardware");
  if (!hw.ok()) return hw.error();
  hardware_path = hw.value();
  return sources;
}

// `sim validate --measured PATH`: the roofline against measured timings instead of a run.
int validate_measured_command(const Command& c, const po::variables_map& vm, std::ostream& out,
                              std::ostream& err) {
  Result<MeasuredRequest> request = measured_request(vm);
  if (!request.ok()) return finish(c, request.error(), err);
  MeasuredRequest& r = request.value();
  const std::string format = vm["format"].as<std::string>();
  if (format != "text" && format != "json") {
    return finish(c, Error{"--format: expected text or json, got '" + format + "'"}, err);
  }
  r.format = format == "json" ? ReportFormat::kJson : ReportFormat::kText;
  return finish(c, validate_measured_path(r, out), err);
}

}  // namespace

int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // A vLLM benchmark result replays its requests: a run's options, not this command's.
  for (const std::string& a : args) {
    if (a == "--vllm-result" || a.starts_with("--vllm-result=")) return validate_vllm_command(args, out, err);
  }
  const Command c{"validate",
                  "Usage: sim validate [--db FILE] [--run ID] [--hardware FILE]\n"
                  "       sim validate --measured PATH [--hardware NAME|FILE] [--model NAME|FILE] [--tp N]\n"
                  "                    [--format text|json]\n"
                  "       sim validate --vllm-result FILE [run options] [--format text|json]\n"
                  "                    (`sim validate --vllm-result FILE --help` lists its options)\n"
                  "For a run of a measuring backend (--backend cpu or cuda), the error of the\n"
                  "roofline's prediction per iteration, overall, by kind of iteration and by batch\n"
                  "size; stored as validate_* metrics of the run. With --hardware, the run's batches\n"
                  "are priced again with that file (e.g. one from sim calibrate).\n"
                  "With --measured, the roofline against measured GPU timings instead: a Vidur profile\n"
                  "folder (data/measured/vidur/compute/a100/meta-llama/Llama-2-7b-hf; its path implies\n"
                  "--hardware and --model) or a CSV of iteration,new_tokens,context_tokens,measured_ms\n"
                  "(data/measured/README.md). Prints the MAPE overall, by kind and size, the bias\n"
                  "(mean signed error: > 0 the roofline is too slow) and the worst shapes.\n"
                  "With --vllm-result, a `vllm bench serve --save-result --save-detailed` file against\n"
                  "the simulator's replay of its requests: TTFT, TPOT, ITL and E2E latency percentiles\n"
                  "side by side, their errors, MAPE and the Kolmogorov-Smirnov distance.\n"};
  po::options_description o = read_options(c);
  o.add_options()("hardware", po::value<std::string>()->value_name("NAME|FILE"),
                  "re-price the run's batches with this hardware file")(
      "measured", po::value<std::string>()->value_name("PATH"),
      "compare with measured timings: a Vidur profile folder or a CSV of ours")(
      "model", po::value<std::string>()->value_name("NAME|FILE"), "with --measured: the model measured")(
      "tp", po::value<int64_t>()->default_value(1)->value_name("N"),
      "with --measured: tensor-parallel degree")(
      "format", po::value<std::string>()->default_value("text")->value_name("FMT"),
      "with --measured: text | json");
  po::variables_map vm;
  if (auto done = parse(c, args, o, vm, out, err)) return *done;
  if (vm.count("measured") != 0) return validate_measured_command(c, vm, out, err);
  if (vm.count("model") != 0 || !vm["tp"].defaulted() || !vm["format"].defaulted()) {
    return finish(c, Error{"--model, --tp and --format apply with --measured only"}, err);
  }
  std::optional<std::string> hardware;
  if (vm.count("hardware") != 0) {
    Result<std::string> p = resolve_preset(vm["hardware"].as<std::string>(), PresetKind::kHardware, "--hardware");
    if (!p.ok()) return finish(c, p.error(), err);
    hardware = p.value();
  }
  return finish(c, validate_run(vm["db"].as<std::string>(), run_id(vm), out, hardware), err);
}

int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  for (const std::string& a : args) {
    if (a == "--vllm-result" || a.starts_with("--vllm-result=")) return calibrate_engine_command(args, out, err);
  }
  const Command c{"calibrate",
                  "Usage: sim calibrate [--db FILE] [--run ID] --out FILE [--fit KEY,...]\n"
                  "                     [--bootstrap N] [--seed N]\n"
                  "       sim calibrate --measured PATH [--measured PATH ...] [--hardware NAME|FILE]\n"
                  "                     [--model NAME|FILE ...] [--tp N ...] --out FILE [--fit KEY,...]\n"
                  "                     [--bootstrap N] [--seed N]\n"
                  "       sim calibrate --vllm-result FILE [--vllm-result FILE ...] --out ENGINE.toml [run options]\n"
                  "                     (an engine file's host terms; sim calibrate --vllm-result --help)\n"
                  "Fits the hardware file's efficiencies (attention of decodes, of prompts over their\n"
                  "cache and of prompts' own tokens apart), gemm_half_rows, gemm_tile_rows, the\n"
                  "per-sequence attention cost and the overhead to a measured run (--backend cpu or\n"
                  "cuda) with NLopt's BOBYQA and writes a new hardware file.\n"
                  "Prints whether the fit converged, each value with a bootstrap range and a warning\n"
                  "when it sits at a bound, the error on a held-out half of the iterations, and the\n"
                  "signed residuals by kind and size of batch; `sim validate --hardware FILE` then\n"
                  "shows the error it leaves. With --measured, fits to measured GPU timings instead\n"
                  "(a Vidur profile folder or a CSV, as `sim validate --measured` reads them), pricing\n"
                  "only the parts each covers; several --measured (models of one GPU) make one fit,\n"
                  "with each source's error. `sim validate --measured PATH --hardware FILE` then\n"
                  "shows the error it leaves.\n"};
  po::options_description o = read_options(c);
  const CalibrationOptions defaults;
  o.add_options()("out", po::value<std::string>()->value_name("FILE"),
                  "the hardware file to write (required)")(
      "fit", po::value<std::string>()->value_name("KEY,..."),
      "the keys to fit (default: all of gemm_efficiency, memory_efficiency, attention_efficiency, "
      "prefill_attention_efficiency, prefill_self_attention_efficiency, gemm_half_rows, gemm_tile_rows, "
      "overhead_us, attention_sequence_us); the others keep the run's values")(
      "bootstrap", po::value<int>()->default_value(defaults.bootstrap)->value_name("N"),
      "resamples for the 95 % ranges (0: none)")(
      "seed", po::value<int64_t>()->default_value(static_cast<int64_t>(defaults.seed))->value_name("N"),
      "seed of the resamples and of the held-out half")(
      "measured", po::value<std::vector<std::string>>()->value_name("PATH"),
      "fit to measured timings: a Vidur profile folder or a CSV of ours; repeat it to fit several "
      "models of one GPU at once")(
      "hardware", po::value<std::string>()->value_name("NAME|FILE"),
      "with --measured: the GPU to fit (its file is the start; a Vidur folder implies it)")(
      "model", po::value<std::vector<std::string>>()->value_name("NAME|FILE"),
      "with --measured: the model measured (a Vidur folder implies it); once for all, or once per --measured")(
      "tp", po::value<std::vector<int64_t>>()->value_name("N"),
      "with --measured: tensor-parallel degree (default 1); once for all, or once per --measured");
  po::variables_map vm;
  if (auto done = parse(c, args, o, vm, out, err)) return *done;
  if (vm.count("out") == 0) return finish(c, Error{"--out FILE is required"}, err);
  CalibrationOptions options;
  options.bootstrap = vm["bootstrap"].as<int>();
  if (options.bootstrap < 0 || options.bootstrap > 100000) {
    return finish(c, Error{"--bootstrap: expected 0 to 100000 resamples"}, err);
  }
  if (vm["seed"].as<int64_t>() < 0) return finish(c, Error{"--seed: expected a number >= 0"}, err);
  options.seed = static_cast<uint64_t>(vm["seed"].as<int64_t>());
  if (vm.count("fit") != 0) {
    options.keys.clear();
    std::string list = vm["fit"].as<std::string>();
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(',', start), list.size());
      Result<FitKey> key = parse_fit_key(list.substr(start, comma - start));
      if (!key.ok()) return finish(c, Error{"--fit: " + key.error().message}, err);
      if (std::find(options.keys.begin(), options.keys.end(), key.value()) != options.keys.end()) {
        return finish(c, Error{"--fit: " + list.substr(start, comma - start) + " is given twice"}, err);
      }
      options.keys.push_back(key.value());
      start = comma + 1;
    }
  }
  if (vm.count("measured") != 0) {
    std::string hardware_path;
    Result<std::vector<MeasuredProfile>> sources = measured_profiles(vm, hardware_path);
    if (!sources.ok()) return finish(c, sources.error(), err);
    std::vector<OutputFile::Protected> inputs;
    for (const MeasuredProfile& m : sources.value()) inputs.push_back({"--measured", m.path});
    OutputFile file("--out", vm["out"].as<std::string>(), std::move(inputs));
    return finish(c, calibrate_measured(sources.value(), hardware_path, file, out, options), err, &file);
  }
  if (vm.count("hardware") != 0 || vm.count("model") != 0 || vm.count("tp") != 0) {
    return finish(c, Error{"--hardware, --model and --tp apply with --measured only"}, err);
  }
  const std::string db = vm["db"].as<std::string>();
  OutputFile file("--out", vm["out"].as<std::string>(), {{"--db", db}});
  return finish(c, calibrate_run(db, run_id(vm), file, out, options), err, &file);
}

}  // namespace servesim
