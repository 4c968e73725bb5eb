// The `sim` executable: dispatches to `run` (the default), `report`, `list`, `validate`,
// `calibrate` and `probe`.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "backends/engine_profile.h"
#include "backends/hardware.h"
#include "backends/model.h"
#include "backends/probe.h"
#include "backends/registry.h"
#include "policies/registry.h"
#include "routers/registry.h"
#include "cli/cli.h"
#include "sim/io/output_file.h"
#include "sim/config/presets.h"

namespace servesim {
namespace po = boost::program_options;
namespace {

void print_overview(std::ostream& out) {
  out << "servesim " << SERVESIM_VERSION << ": a discrete-event simulator of LLM inference serving.\n\n"
         "Usage:\n"
         "  sim [run] --trace FILE [--policy NAME] [options]   simulate a workload into sim.db\n"
         "  sim [run] --seeds N --trace FILE [options]         the same over N seeds: mean and 95 % CI\n"
         "  sim [run] --trace FILE --bootstrap N [options]     one run, its requests resampled: 95 % intervals\n"
         "  sim [run] --hardware CALIBRATED --model-uncertainty [N] [options]   the band from the\n"
         "                                                 calibration's own uncertainty\n"
         "  sim sweep [SWEEP.toml] --grid KEY=V1,V2 ... [run options]   a grid of runs, in parallel\n"
         "  sim search --slo p99_ttft=2s [--grid KEY=V1,V2 ...] [run options]   the largest rate, or\n"
         "                                                 the cheapest configuration, under SLOs\n"
         "  sim merge A.db B.db ... --into ALL.db          the runs (and sweeps) of several files in one\n"
         "  sim report [--db FILE] [--run ID | --sweep [ID]] [--format text|json|csv|vllm-json] [--bootstrap N]\n"
         "  sim compare RUN RUN ... [--db FILE]           runs' metrics side by side, with differences\n"
         "  sim list runs|policies|routers|backends|hardware|models|engines\n"
         "  sim memory --model M --hardware H [--tp N]   the KV cache as vLLM lays it out: groups,\n"
         "                                                 blocks, maximum concurrency\n"
         "  sim validate [--db FILE] [--run ID] [--hardware FILE]   prediction error of a measured run\n"
         "  sim validate --measured PATH [--hardware H] [--model M]   the roofline against GPU timings\n"
         "  sim validate --vllm-result FILE [run options]   a vllm bench serve result against its replay\n"
         "  sim calibrate [--db FILE] [--run ID] --out FILE         fit a hardware file to it\n"
         "  sim calibrate --measured PATH [--measured PATH ...] --out FILE   ... or to GPU timings\n"
         "  sim calibrate --vllm-result FILE ... --out ENGINE.toml   an engine's host terms from vllm bench serve\n"
         "  sim probe --out FILE                         measure this host into a hardware file\n\n"
         "Start with:\n"
         "  sim --policy continuous --trace pareto.toml\n"
         "  sim report\n\n"
         "`sim run --help` lists every run option.\n";
}

int probe_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() != 2 || args[0] != "--out") {
    const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
    (help ? out : err) << "Usage: sim probe --out FILE\n"
                          "Measures this machine (the cpu engine's matrix product, memory bandwidth) and\n"
                          "writes a hardware file for `sim --backend cpu --hardware FILE`.\n";
    return help ? kExitOk : kExitBadInput;
  }
  OutputFile file("--out", args[1]);
  if (Status s = file.check(); !s.ok()) {  // before the measurement, which takes seconds
    err << "sim probe: " << s.error().message << "\n";
    return kExitBadInput;
  }
  const ProbeResult r = probe_host();
  if (Status s = write_probe(r, file); !s.ok()) {
    err << "sim probe: " << s.error().message << "\n";
    return file.write_failed() ? kExitFailed : kExitBadInput;
  }
  char line[160];
  std::snprintf(line, sizeof line,
                "matrix product: %.1f GFLOP/s; memory: %.1f GB/s; host memory %.1f GiB -> %s\n",
                r.gemm_flops / 1e9, r.memory_bandwidth / 1e9, r.memory_bytes / (1 << 30),
                args[1].c_str());
  out << line;
  return kExitOk;
}

// One hardware preset's line: its memory, bandwidth, compute and ridge point; false when it does
// not load (said on `err`).
bool hardware_line(const std::string& path, const std::string& stem, char (&line)[256], std::ostream& err) {
  Result<HardwareSpec> h = load_hardware(path);
  if (!h.ok()) {
    err << "sim list: " << h.error().message << "\n";
    return false;
  }
  const HardwareSpec& hw = h.value();
  // The ridge point: FLOP per byte where compute time and memory time meet.
  std::snprintf(line, sizeof line, "%-16s %-26s %8.1f %9.0f %9.0f %10.0f\n", stem.c_str(),
                hw.name.substr(0, 26).c_str(), hw.memory_bytes / (1 << 30),
                hw.memory_bandwidth / 1e9, hw.fp16_flops / 1e12, hw.ridge_point());
  return true;
}

// One model preset's line: its architecture, size (all and active), weights as the checkpoint
// stores them, KV per token and context.
bool model_line(const std::string& path, const std::string& stem, char (&line)[256], std::ostream& err) {
  Result<ModelSpec> m = load_model(path);
  if (!m.ok()) {
    err << "sim list: " << m.error().message << "\n";
    return false;
  }
  const ModelSpec& md = m.value();
  const WeightFormat& q = md.quantization;
  const std::string precision = q.method.empty() ? dtype_name(md.dtype) : q.method;
  std::snprintf(line, sizeof line, "%-19s %-24s %8.1fB %7.1fB %8.1fGB %-10s %9.0f %8lld\n",
                stem.c_str(), attention_summary(md).substr(0, 24).c_str(), md.num_params() / 1e9,
                md.active_params() / 1e9, md.weight_bytes(q.method.empty() ? weight_format_of(md.dtype) : q) / 1e9,
                precision.substr(0, 10).c_str(), md.kv_bytes_per_token(md.dtype),
                static_cast<long long>(md.max_position_embeddings));
  return true;
}

// One engine preset's line: its name, async scheduling, CUDA graphs and host costs.
bool engine_line(const std::string& path, const std::string& stem, char (&line)[256], std::ostream& err) {
  Result<EngineProfile> e = load_engine_profile(path);
  if (!e.ok()) {
    err << "sim list: " << e.error().message << "\n";
    return false;
  }
  const EngineProfile& p = e.value();
  std::snprintf(line, sizeof line, "%-16s %-28s %5s %7d %9.0f %9.1f %10.2f\n", stem.c_str(), p.name.substr(0, 28).c_str(),
                p.async_scheduling ? "yes" : "no", p.max_cudagraph_capture_size, p.step * 1e6, p.step_per_seq * 1e6,
                p.request * 1e3);
  return true;
}

// `sim list hardware`, `sim list models` and `sim list engines`: a table of the presets.
void list_presets_table(PresetKind kind, const std::string& what, std::ostream& out, std::ostream& err) {
  const std::vector<std::string> names = list_presets(kind);
  if (names.empty()) out << "(no " << what << " presets are installed)\n";
  char line[256];
  if (kind == PresetKind::kHardware) {
    std::snprintf(line, sizeof line, "%-16s %-26s %8s %9s %9s %10s\n", "preset", "name", "GiB",
                  "GB/s", "TFLOP/s", "FLOP/byte");
  } else if (kind == PresetKind::kEngine) {
    std::snprintf(line, sizeof line, "%-16s %-28s %5s %7s %9s %9s %10s\n", "preset", "name", "async", "graphs",
                  "step us", "/seq us", "request ms");
  } else {
    std::snprintf(line, sizeof line, "%-19s %-24s %9s %8s %10s %-10s %9s %8s\n", "preset", "layers",
                  "params", "active", "weights", "precision", "KV B/tok", "context");
  }
  out << line;
  for (const std::string& n : names) {
    const std::string path = resolve_preset(n, kind, "list").value();
    const std::string stem = n.substr(0, n.rfind('.'));
    const bool listed = kind == PresetKind::kHardware ? hardware_line(path, stem, line, err)
                        : kind == PresetKind::kEngine ? engine_line(path, stem, line, err)
                                                      : model_line(path, stem, line, err);
    if (listed) out << line;
  }
  if (kind == PresetKind::kHardware) {
    out << "(dense FP16/BF16 peak; FLOP/byte is the ridge point. `--hardware FILE` takes your own.)\n";
  } else if (kind == PresetKind::kEngine) {
    out << "(graphs: the largest CUDA-graph capture size (0: eager); step: host time per iteration the GPU\n"
           " waits for, and per scheduled request; request: API-server time added to TTFT and E2E.\n"
           " `--engine FILE` takes your own, `--engine none` prices the kernels alone.)\n";
  } else {
    out << "(layers: attention kinds and counts (full, swa = sliding window, chunk = chunked local,\n"
           " mla = latent, linear = constant state), moe = layers with experts. Weights as stored;\n"
           " KV per token at the torch_dtype over the layers that keep it. `--model FILE` takes any\n"
           " config.json of the architectures in docs/reference.md.)\n";
  }
}

int list_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string what = args.empty() ? "" : args.front();
  if (what == "runs") return list_runs_command(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (args.size() > 1 || (what != "policies" && what != "routers" && what != "backends" && what != "hardware" &&
                          what != "models" && what != "engines")) {
    err << "sim list: expected one of: runs, policies, routers, backends, hardware, models, engines\n";
    return what == "--help" || what == "-h" ? kExitOk : kExitBadInput;
  }
  if (what == "policies") {
    for (const PolicyInfo& p : policy_registry()) {
      out << p.name << "\n  " << p.summary << "\n  options: " << p.options_help << "\n";
    }
  } else if (what == "routers") {
    for (const RouterInfo& r : router_registry()) {
      out << r.name << "\n  " << r.summary << "\n  options: "
          << (r.options_help.empty() ? std::string_view("none") : r.options_help)
          << "; session_affinity = true (a request with parents goes where its first parent went)\n";
    }
  } else if (what == "backends") {
    for (const BackendInfo& b : backend_registry()) out << b.name << "\n  " << b.summary << "\n";
  } else {
    list_presets_table(what == "hardware"  ? PresetKind::kHardware
                       : what == "engines" ? PresetKind::kEngine
                                           : PresetKind::kModel,
                       what, out, err);
  }
  return kExitOk;
}

}  // namespace

int sim_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    print_overview(out);
    return kExitBadInput;
  }
  const std::string& first = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (first == "--help" || first == "-h" || first == "help") {
    print_overview(out);
    return kExitOk;
  }
  if (first == "--version") {
    out << "servesim " << SERVESIM_VERSION << "\n";
    return kExitOk;
  }
  if (first == "run") return run_command(rest, out, err);
  if (first == "report") return report_command(rest, out, err);
  if (first == "sweep") return sweep_command(rest, out, err);
  if (first == "merge") return merge_command(rest, out, err);
  if (first == "search") return search_command(rest, out, err);
  if (first == "list") return list_command(rest, out, err);
  if (first == "memory") return memory_command(rest, out, err);
  if (first == "compare") return compare_command(rest, out, err);
  if (first == "validate") return validate_command(rest, out, err);
  if (first == "probe") return probe_command(rest, out, err);
  if (first == "calibrate") return calibrate_command(rest, out, err);
  if (!first.empty() && first[0] != '-') {
    err << "sim: unknown command '" << first
        << "' (commands: run, sweep, search, merge, report, compare, list, validate, calibrate, probe). Try 'sim --help'.\n";
    return kExitBadInput;
  }
  return run_command(args, out, err);
}

}  // namespace servesim

namespace {

// Flushes and closes standard output: "" when everything written to it arrived, else why not.
std::string close_stdout() {
  errno = 0;
  std::cout.flush();
  bool ok = static_cast<bool>(std::cout);
  if (std::fflush(stdout) != 0) ok = false;
  int reason = errno;
  if (std::ferror(stdout) != 0) ok = false;
  if (std::fclose(stdout) != 0) {
    ok = false;
    reason = errno;
  }
  if (ok) return "";
  return reason != 0 ? std::strerror(reason) : "an earlier write failed";
}

}  // namespace

namespace {

// SIGINT, SIGTERM and SIGHUP outside a run, a sweep, a search or a merge (which stop cleanly with
// what they wrote: cli/stop_signals.h): the commands that only read or compute (report
// --bootstrap, probe, calibrate) end at once, with a word and exit status 130, as a stopped run
// does. Their output files are written whole or not at all (sim/io/output_file.h).
extern "C" void on_stop_outside_a_run(int sig) {
  static const char kNote[] = "sim: stopped by a signal before it finished; nothing was written\n";
  const ssize_t ignored = ::write(STDERR_FILENO, kNote, sizeof kNote - 1);
  (void)ignored;
  (void)sig;
  ::_exit(servesim::kExitInterrupted);
}

}  // namespace

int main(int argc, char** argv) {
  // A write past `ulimit -f` fails with EFBIG through each writer's own error path (a message, a
  // failed run, exit 1) instead of SIGXFSZ killing the process with no word.
  std::signal(SIGXFSZ, SIG_IGN);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, on_stop_outside_a_run);
  std::vector<std::string> args(argv + 1, argv + argc);
  int status = servesim::sim_main(args, std::cout, std::cerr);
  // What went to standard output is part of the result: a full disk behind it (`sim list runs >
  // /dev/full`) is a failure, not a success that printed nothing.
  if (const std::string failed = close_stdout(); !failed.empty()) {
    std::cerr << "sim: writing standard output failed: " << failed << "\n";
    if (status == servesim::kExitOk) status = servesim::kExitFailed;
  }
  return status;
}
