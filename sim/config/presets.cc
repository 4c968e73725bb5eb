#include "sim/config/presets.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "sim/config/toml_fields.h"

namespace servesim {
namespace fs = std::filesystem;
namespace {

const char* subdir(PresetKind kind) {
  switch (kind) {
    case PresetKind::kWorkload: return "workloads";
    case PresetKind::kHardware: return "hardware";
    case PresetKind::kModel: return "models";
    case PresetKind::kEngine: return "engines";
  }
  return "";
}

// The folders of a data folder that hold presets of a kind: a workload is a generated workload
// (workloads/) or a shipped trace (traces/).
std::vector<std::string> subdirs(PresetKind kind) {
  if (kind == PresetKind::kWorkload) return {"workloads", "traces"};
  return {subdir(kind)};
}

std::vector<std::string> extensions(PresetKind kind) {
  switch (kind) {
    case PresetKind::kWorkload: return {"", ".toml", ".csv", ".jsonl"};
    case PresetKind::kHardware: return {"", ".toml"};
    case PresetKind::kModel: return {"", ".json"};
    case PresetKind::kEngine: return {"", ".toml"};
  }
  return {""};
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

}  // namespace

std::vector<std::string> data_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("SERVESIM_DATA"); env != nullptr && *env != '\0') {
    dirs.emplace_back(env);
  }
  // An installed `sim` reads the installed presets; one run from its build folder reads the source
  // tree's, so that it never picks up presets from an older installation.
  std::error_code link_error;
  const std::string exe = fs::read_symlink("/proc/self/exe", link_error).string();
  const bool installed = !link_error && exe.rfind(SERVESIM_INSTALL_PREFIX, 0) == 0;
  if (installed) dirs.emplace_back(SERVESIM_INSTALL_DATA_DIR);
  dirs.emplace_back(SERVESIM_SOURCE_DATA_DIR);
  if (!installed) dirs.emplace_back(SERVESIM_INSTALL_DATA_DIR);
  std::vector<std::string> existing;
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (fs::is_directory(d, ec) && std::find(existing.begin(), existing.end(), d) == existing.end()) {
      existing.push_back(d);
    }
  }
  return existing;
}

Result<std::string> resolve_preset(std::string_view value, PresetKind kind, std::string_view option) {
  const std::string v(value);
  if (is_file(v)) return v;
  const fs::path name(v);
  std::error_code ec;
  if (fs::exists(v, ec) || name.has_parent_path()) {
    // A path that names something other than a readable file: say what it is.
    const Status readable = check_readable_file(v);
    return Error{std::string(option) + ": " + (readable.ok() ? v + ": cannot open file" : readable.error().message)};
  }
  for (const std::string& dir : data_dirs()) {
    for (const std::string& sub : subdirs(kind)) {
      for (const std::string& ext : extensions(kind)) {
        const fs::path p = fs::path(dir) / sub / (v + ext);
        if (is_file(p)) return p.string();
      }
    }
  }
  std::string known;
  for (const std::string& p : list_presets(kind)) known += (known.empty() ? "" : ", ") + p;
  return Error{std::string(option) + ": no file '" + v + "' in the working directory, and no " +
               subdir(kind) + " preset of that name (presets: " +
               (known.empty() ? std::string("none installed") : known) + ")"};
}

std::vector<std::string> list_presets(PresetKind kind) {
  for (const std::string& dir : data_dirs()) {
    std::set<std::string> names;
    for (const std::string& sub : subdirs(kind)) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(fs::path(dir) / sub, ec)) {
        if (!e.is_regular_file()) continue;
        const std::string ext = e.path().extension().string();
        const auto exts = extensions(kind);
        if (!ext.empty() && std::find(exts.begin(), exts.end(), ext) != exts.end()) {
          names.insert(e.path().filename().string());
        }
      }
    }
    if (!names.empty()) return {names.begin(), names.end()};
  }
  return {};
}

std::string preset_display_name(const std::string& path, PresetKind kind) {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(path, ec);
  if (ec) return path;
  for (const std::string& dir : data_dirs()) {
    for (const std::string& sub : subdirs(kind)) {
      const fs::path folder = fs::weakly_canonical(fs::path(dir) / sub, ec);
      if (!ec && file.parent_path() == folder) return file.stem().string();
    }
  }
  return path;
}

std::optional<std::string> model_preset_for_repository(std::string_view id) {
  // The repositories of data/models/README.md, and their variants with the same config shapes and
  // context length.
  static const std::pair<const char*, const char*> kRepositories[] = {
      {"meta-llama/Llama-2-7b-hf", "llama-2-7b"},
      {"meta-llama/Llama-2-7b-chat-hf", "llama-2-7b"},
      {"meta-llama/Meta-Llama-3-8B", "llama-3-8b"},
      {"meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"},
      {"meta-llama/Meta-Llama-3-70B", "llama-3-70b"},
      {"meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b"},
      {"mistralai/Mistral-7B-v0.1", "mistral-7b"},
      {"mistralai/Mistral-7B-Instruct-v0.1", "mistral-7b"},
      {"mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"},
      {"mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"},
      {"Qwen/Qwen2.5-0.5B-Instruct", "qwen2.5-0.5b"},
      {"Qwen/Qwen2.5-7B", "qwen2.5-7b"},
      {"meta-llama/Llama-3.1-70B", "llama-3.1-70b"},
      {"meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"},
      {"meta-llama/Llama-3.1-8B", "llama-3.1-8b"},
      {"meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"},
      {"meta-llama/Llama-3.1-405B", "llama-3.1-405b"},
      {"meta-llama/Llama-3.1-405B-Instruct", "llama-3.1-405b"},
      {"meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"},
      {"meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"},
      {"meta-llama/Llama-4-Maverick-17B-128E-Instruct", "llama-4-maverick"},
      {"deepseek-ai/DeepSeek-V3", "deepseek-v3"},
      {"deepseek-ai/DeepSeek-V3-0324", "deepseek-v3"},
      {"deepseek-ai/DeepSeek-R1", "deepseek-v3"},
      {"deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"},
      {"Qwen/Qwen3-8B", "qwen3-8b"},
      {"Qwen/Qwen3-32B", "qwen3-32b"},
      {"Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"},
      {"Qwen/Qwen3-30B-A3B-FP8", "qwen3-30b-a3b-fp8"},
      {"Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"},
      {"Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3-next-80b-a3b"},
      {"Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3-next-80b-a3b"},
      {"openai/gpt-oss-20b", "gpt-oss-20b"},
      {"openai/gpt-oss-120b", "gpt-oss-120b"},
      {"google/gemma-3-27b-it", "gemma-3-27b"},
  };
  const auto lower = [](std::string_view v) {
    std::string out(v);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
  };
  std::string key = lower(id);
  while (!key.empty() && key.back() == '/') key.pop_back();
  for (const auto& [repository, preset] : kRepositories) {
    const std::string r = lower(repository);
    const std::string name = r.substr(r.find('/') + 1);
    // The id itself, or a path whose last component is the repository's name.
    if (key == r || key == name || (key.size() > name.size() && key.ends_with("/" + name))) return preset;
  }
  return std::nullopt;
}

}  // namespace servesim
