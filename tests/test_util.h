// Small helpers shared by the workload and trace tests: temporary files and parsing workload text.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "workloads/workload.h"

#ifndef SERVESIM_PROJECT_DIR
#define SERVESIM_PROJECT_DIR "."  // when built outside CMake, from the repository root
#endif

namespace servesim::testing {

inline const std::string kExcerpts = SERVESIM_PROJECT_DIR "/tests/data/traces/";
// The real traces shipped with servesim (data/traces/README.md).
inline const std::string kShippedTraces = SERVESIM_PROJECT_DIR "/data/traces/";

// The path of a file `name` in a folder of the running test's own (ctest runs a file's tests side
// by side, and CI may run two builds' tests at once: a fixed name in the temp folder races).
inline std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("servesim_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
                    std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Writes `text` to a file `name` in a fresh folder of the running test; returns its path.
inline std::string write_temp(const std::string& name, std::string_view text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Parses workload text that must be valid ("w.toml" in messages).
inline Workload parse_ok(std::string_view text, std::optional<uint64_t> seed = std::nullopt) {
  auto w = parse_workload(text, "w.toml", seed);
  EXPECT_TRUE(w.ok()) << w.error().message;
  return w.ok() ? std::move(w).value() : Workload{};
}

// Parses workload text that must be invalid; returns the message.
inline std::string parse_error(std::string_view text) {
  auto w = parse_workload(text, "w.toml", std::nullopt);
  EXPECT_FALSE(w.ok()) << text;
  return w.ok() ? std::string() : w.error().message;
}

}  // namespace servesim::testing
