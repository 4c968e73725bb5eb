#include "sim/config/presets.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace servesim {
namespace {
namespace fs = std::filesystem;

TEST(Presets, AnExistingFileIsItself) {
  const std::string path = servesim::testing::temp_path("presets_test_workload.toml");
  std::ofstream(path) << "[[request]]\noutput_tokens = 1\n";
  EXPECT_EQ(resolve_preset(path, PresetKind::kWorkload, "--trace").value(), path);
}

TEST(Presets, ShippedWorkloadsAreFoundByNameWithOrWithoutExtension) {
  Result<std::string> a = resolve_preset("pareto.toml", PresetKind::kWorkload, "--trace");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_TRUE(fs::exists(a.value()));
  Result<std::string> b = resolve_preset("seed-toy", PresetKind::kWorkload, "--trace");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fs::path(b.value()).filename(), "seed-toy.toml");
}

TEST(Presets, ShippedTracesAreFoundByNameInTheTracesFolder) {
  for (const char* name : {"azure-conv.csv", "azure-code", "mooncake-conversation.jsonl"}) {
    Result<std::string> r = resolve_preset(name, PresetKind::kWorkload, "--trace");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(fs::path(r.value()).parent_path().filename(), "traces") << r.value();
    EXPECT_EQ(preset_display_name(r.value(), PresetKind::kWorkload), fs::path(r.value()).stem().string());
  }
  const std::vector<std::string> names = list_presets(PresetKind::kWorkload);
  for (const char* name : {"azure-conv.csv", "azure-code.csv", "mooncake-conversation.jsonl", "pareto.toml"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(Presets, AMissingNameListsThePresets) {
  Result<std::string> r = resolve_preset("nope.toml", PresetKind::kWorkload, "--trace");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--trace"), std::string::npos);
  EXPECT_NE(r.error().message.find("pareto.toml"), std::string::npos);
  EXPECT_NE(r.error().message.find("seed-toy.toml"), std::string::npos);
  EXPECT_NE(r.error().message.find("azure-conv.csv"), std::string::npos);
  Result<std::string> p = resolve_preset("some/dir/x.toml", PresetKind::kWorkload, "--trace");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("no such file"), std::string::npos);
}

TEST(Presets, TheEnvironmentComesFirst) {
  const fs::path dir = fs::path(servesim::testing::temp_path("presets_env"));
  fs::create_directories(dir / "workloads");
  std::ofstream(dir / "workloads" / "mine.toml") << "[[request]]\noutput_tokens = 1\n";
  setenv("SERVESIM_DATA", dir.c_str(), 1);
  Result<std::string> r = resolve_preset("mine", PresetKind::kWorkload, "--trace");
  unsetenv("SERVESIM_DATA");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(fs::path(r.value()), dir / "workloads" / "mine.toml");
}

TEST(Presets, TheEnvironmentsTracesFolderIsSearchedToo) {
  const fs::path dir = fs::path(servesim::testing::temp_path("presets_env_traces"));
  fs::create_directories(dir / "traces");
  std::ofstream(dir / "traces" / "mine-trace.csv") << "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n";
  setenv("SERVESIM_DATA", dir.c_str(), 1);
  Result<std::string> r = resolve_preset("mine-trace", PresetKind::kWorkload, "--trace");
  const std::vector<std::string> names = list_presets(PresetKind::kWorkload);
  unsetenv("SERVESIM_DATA");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(fs::path(r.value()), dir / "traces" / "mine-trace.csv");
  EXPECT_EQ(names, std::vector<std::string>{"mine-trace.csv"});
}

}  // namespace
}  // namespace servesim
