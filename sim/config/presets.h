// Shipped presets (example workloads and real traces, hardware files, model files) and how a name
// on the command line finds one. A value that names an existing file is that file; otherwise it is
// looked up in the data folders, in order: $SERVESIM_DATA, then the installed data folder for an
// installed `sim` or the source tree's data/ for one run from its build folder, then the other; in
// each, a workload in workloads/ and then traces/. So `sim --trace pareto.toml` and
// `sim --trace azure-conv.csv` work from any directory.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/result.h"

namespace servesim {

enum class PresetKind { kWorkload, kHardware, kModel, kEngine };

// The data folders that exist, in lookup order.
std::vector<std::string> data_dirs();

// The file `value` names: itself if it exists, else a preset of that name (the extension may be
// left out). The error names the option, says where it looked and lists the presets.
Result<std::string> resolve_preset(std::string_view value, PresetKind kind, std::string_view option);

// How a resolved file is named to a user: a shipped preset by its name ("h100-sxm"), any other file
// by its path.
std::string preset_display_name(const std::string& path, PresetKind kind);

// The shipped model preset ("llama-2-7b") of a Hugging Face repository id as vLLM names the model it
// serves ("meta-llama/Llama-2-7b-hf"; the chat and instruct variants of the same shapes and context
// too), or of a local folder ending in the repository's name (".../Llama-2-7b-hf"); compared without
// regard to case. Nothing when no preset has that model's shapes.
std::optional<std::string> model_preset_for_repository(std::string_view id);

// Preset file names of a kind (from the first data folder that has any), sorted.
std::vector<std::string> list_presets(PresetKind kind);

}  // namespace servesim
