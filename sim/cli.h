// The `sim` command line: subcommands `run` (the default), `report` and `list`, parsed with
// Boost.Program_options. Each subcommand returns the process's exit status: 0 success, 1 a run that
// failed inside, 2 bad input (nothing half-written), 130 interrupted by Ctrl-C.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace servesim {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInterrupted = 130;

// Dispatches on the first argument. args excludes the program name.
int sim_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `sim run`: one simulation into the database. (sim/run_command.cc)
int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Commands that read a logged run back (sim/run_commands.cc).
int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int validate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int calibrate_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace servesim
