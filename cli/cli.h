// The `sim` command line: subcommands `run` (the default), `report` and `list`, parsed with
// Boost.Program_options. Each subcommand returns the process's exit status: 0 success, 1 a run that
// failed inside, 2 bad input (nothing half-written), 130 interrupted by Ctrl-C.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <toml++/toml.h>

#include "analysis/reports/bootstrap.h"
#include "sim/config/config.h"
#include "workloads/vllm_bench_result.h"
#include "sim/result.h"

namespace servesim {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInterrupted = 130;

// Dispatches on the first argument. args excludes the program name.
int sim_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `sim run`: one simulation into the database. (cli/run_command.cc)
int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The options of `sim run`, which `sim sweep` and `sim search` take too.
boost::program_options::options_description run_options();
// Parses a command that takes its own options and all of `sim run`'s into vm: --help prints the
// usage and both option lists (exit status 0); an unknown or malformed option prints the error on
// err as "sim NAME: ..." with a pointer to --help (status 2). Nothing when the command goes on.
std::optional<int> parse_with_run_options(const std::vector<std::string>& args,
                                          const boost::program_options::options_description& own,
                                          const char* usage, const std::string& name, const std::string& help,
                                          boost::program_options::variables_map& vm, std::ostream& out,
                                          std::ostream& err);
// The configuration table those options describe: --config, then the flags, then --set.
Result<toml::table> config_table_from_flags(const boost::program_options::variables_map& vm);
Result<RunConfig> config_from_flags(const boost::program_options::variables_map& vm);

// `sim [run] --seeds N` (cli/seeds_command.cc): the options it adds to `sim run`'s, and the runs,
// given the parsed options of `sim run` with --seeds among them.
boost::program_options::options_description seeds_options();
int seeds_command(const boost::program_options::variables_map& vm, std::ostream& out, std::ostream& err);
// Prints "sim: MESSAGE" to err and returns kExitBadInput.
int bad_input(std::ostream& err, const std::string& message);
// `sim [run] --model-uncertainty [N]` (cli/seeds_command.cc): the runs over the hardware file's
// calibration samples and their band (analysis/reports/model_band.h).
int model_uncertainty_command(const boost::program_options::variables_map& vm, std::ostream& out, std::ostream& err);
// The options of a bootstrap over a run's requests (`sim run` and `sim report` --bootstrap N, with
// -j N threads), seeded by `seed`. Errors: a count or -j out of range.
Result<BootstrapOptions> bootstrap_options(const boost::program_options::variables_map& vm, uint64_t seed);

// `sim sweep` (cli/sweep_command.cc).
int sweep_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `sim search` (cli/search_command.cc).
int search_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `sim memory` (cli/memory_command.cc): a model's KV cache layout as vLLM computes it.
int memory_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `sim merge` (cli/sweep_command.cc).
int merge_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Commands that read a logged run back (cli/run_commands.cc).
int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `sim validate --vllm-result FILE` (cli/validate_vllm_command.cc): a vLLM benchmark against its replay.
int validate_vllm_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// The configuration that replays a `vllm bench serve` result file (`path`, read into `measured`):
// the run options in vm, the file's model when vm names none, its max_concurrency, no database.
Result<RunConfig> vllm_replay_config(const boost::program_options::variables_map& vm,
                                     const VllmBenchResult& measured, const std::string& path);
// `sim calibrate --vllm-result FILE ...`: an engine file's host terms fitted to the files.
int calibrate_engine_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int compare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `sim list runs` (args: what follows "runs").
int list_runs_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace servesim
