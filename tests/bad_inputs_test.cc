// A sweep of hostile values through every numeric key of every file `sim run` reads (workload TOML
// of each kind, hardware TOML, model config.json, run configuration): negative, zero, NaN,
// infinities, 1e30, 2^63 and beyond, fractions where integers belong, strings, arrays, tables.
// Each must end in exit 2 with a message naming the key (or, for text that is not TOML at all, the
// file and line), or in a correct run: never a signal, a hang, or a `done` run with times out of
// order. Runs in-process (cli/cli.h), so that the sanitizer build checks every path it takes.
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTomlValues = {
    "-1", "0", "nan", "inf", "-inf", "1e30", "-1e30", "9223372036854775807",
    "9223372036854775808", "-9223372036854775809", "2147483648", "2.5", "'text'", "[]", "{}",
    "true", "''"};
const std::vector<std::string> kJsonValues = {
    "-1", "0", "1e30", "-1e30", "1e400", "9223372036854775807", "18446744073709551615",
    "18446744073709551616", "2147483648", "2.5", "\"text\"", "[]", "{}", "true", "null",
    "[[[[[[[[1]]]]]]]]"};

// A file of `key = value` lines; `key` may be written `section.key` to pick the one under
// [section].
struct Line {
  std::string section, key, value;
};

std::string render(const std::vector<Line>& lines, const std::string& target, const std::string& value) {
  std::string out, section = "-";
  for (const Line& l : lines) {
    if (l.section != section) {
      section = l.section;
      if (!section.empty()) out += (section.starts_with("[[") ? section : "[" + section + "]") + "\n";
    }
    if (l.key.empty()) continue;
    const std::string name = (l.section.empty() ? "" : l.section + ".") + l.key;
    out += l.key + " = " + (name == target ? value : l.value) + "\n";
  }
  return out;
}

class BadInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servesim_bad_inputs_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::printf("[ sweep    ] %d runs: %d refused with exit 2, %d ran correctly\n", runs_, refused_,
                runs_ - refused_);
    fs::remove_all(dir_);
  }

  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  // Runs `sim run args` in-process; checks the outcome as the header says. `key` is what the
  // message must name on exit 2.
  void check(const std::vector<std::string>& args, const std::string& key, const std::string& what) {
    std::vector<std::string> full = args;
    full.insert(full.end(), {"--db", (dir_ / "sweep.db").string()});
    std::ostringstream out, err;
    const int rc = run_command(full, out, err);
    ++runs_;
    SCOPED_TRACE(what + "\n" + err.str());
    ASSERT_TRUE(rc == kExitOk || rc == kExitBadInput) << "exit " << rc;
    if (rc == kExitBadInput) {
      ++refused_;
      const std::string e = err.str();
      // The key, or the file's line for text that is not TOML, or what the value leads to (a time
      // past the horizon, a model that does not fit the memory it gives).
      EXPECT_TRUE(e.find(key) != std::string::npos || e.find("malformed") != std::string::npos ||
                  e.find("horizon") != std::string::npos || e.find("does not fit") != std::string::npos)
          << "the message names neither the key nor the file's line";
      return;
    }
    // A done run: every finished request in order, inside the horizon.
    EXPECT_EQ(query("SELECT status FROM runs ORDER BY id DESC LIMIT 1"), "done");
    EXPECT_EQ(query("SELECT count(*) FROM requests WHERE run_id = (SELECT max(id) FROM runs) AND "
                    "status = 'finished' AND NOT (arrival >= 0 AND scheduled >= arrival AND "
                    "first_token > scheduled AND finished >= first_token AND finished <= 1e9)"),
              "0");
    EXPECT_EQ(query("SELECT count(*) FROM requests WHERE run_id = (SELECT max(id) FROM runs) AND "
                    "status = 'unfinished'"),
              "0");
  }

  std::string query(const std::string& sql) const {
    sqlite3* h = nullptr;
    std::string result = "<error>";
    if (sqlite3_open_v2((dir_ / "sweep.db").c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
          sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char* t = sqlite3_column_text(st, 0);
        result = t != nullptr ? reinterpret_cast<const char*>(t) : "NULL";
      }
      sqlite3_finalize(st);
    }
    sqlite3_close(h);
    return result;
  }

  // Every numeric key of `lines`, with every hostile value, in the file `name` given to `option`.
  void sweep(const std::vector<Line>& lines, const std::string& name,
             const std::vector<std::string>& base_args, const std::string& option) {
    for (const Line& l : lines) {
      if (l.key.empty() || l.value.starts_with("\"") || l.value.starts_with("'")) continue;
      const std::string key = (l.section.empty() ? "" : l.section + ".") + l.key;
      for (const std::string& v : kTomlValues) {
        const std::string file = write(name, render(lines, key, v));
        std::vector<std::string> args = base_args;
        args.insert(args.end(), {option, file});
        check(args, l.key, key + " = " + v);
      }
    }
  }

  fs::path dir_;
  int runs_ = 0, refused_ = 0;
};

TEST_F(BadInputs, GeneratedWorkloads) {
  const std::vector<Line> generated = {
      {"generate", "requests", "20"},        {"generate", "seed", "1"},
      {"generate", "max_tokens", "64"},      {"generate.arrival", "process", "'gamma'"},
      {"generate.arrival", "rate", "5.0"},   {"generate.arrival", "cv", "2.0"},
      {"generate.prompt_tokens", "dist", "'lognormal'"},
      {"generate.prompt_tokens", "mean", "100.0"}, {"generate.prompt_tokens", "sigma", "1.0"},
      {"generate.prompt_tokens", "min", "1"}, {"generate.prompt_tokens", "max", "500"},
      {"generate.output_tokens", "dist", "'pareto'"}, {"generate.output_tokens", "shape", "1.5"},
      {"generate.output_tokens", "scale", "5"}, {"generate.output_tokens", "max", "50"},
      {"generate.prefixes", "share", "0.5"}, {"generate.prefixes", "count", "2"},
      {"generate.prefixes", "tokens", "32"}, {"generate.priority", "values", "[0, 1]"},
      {"generate.priority", "weights", "[1, 2]"}};
  sweep(generated, "w.toml", {"--backend", "unit", "--policy", "prefix-cached"}, "--trace");
  const std::vector<Line> sessions = {
      {"generate", "requests", "4"},
      {"generate.arrival", "process", "'poisson'"}, {"generate.arrival", "rate", "1.0"},
      {"generate.output_tokens", "dist", "'fixed'"}, {"generate.output_tokens", "value", "3"},
      {"generate.sessions", "think_time", "2.0"}, {"generate.sessions.turns", "dist", "'uniform'"},
      {"generate.sessions.turns", "min", "1"}, {"generate.sessions.turns", "max", "3"}};
  sweep(sessions, "s.toml", {"--backend", "unit", "--policy", "continuous"}, "--trace");
  const std::vector<Line> by_duration = {
      {"generate", "duration", "10.0"}, {"generate.arrival", "process", "'constant'"},
      {"generate.arrival", "rate", "2.0"}, {"generate.output_tokens", "dist", "'normal'"},
      {"generate.output_tokens", "mean", "5.0"}, {"generate.output_tokens", "std", "2.0"}};
  sweep(by_duration, "d.toml", {"--backend", "unit", "--policy", "static"}, "--trace");
  EXPECT_GT(refused_, 0);
  EXPECT_LT(refused_, runs_);  // some values are fine where they stand
}

TEST_F(BadInputs, ExplicitAndReplayedWorkloads) {
  const std::vector<Line> explicit_requests = {
      {"[[request]]", "id", "'a'"},          {"[[request]]", "arrival", "0.5"},
      {"[[request]]", "prompt_tokens", "10"}, {"[[request]]", "output_tokens", "3"},
      {"[[request]]", "max_tokens", "8"},    {"[[request]]", "priority", "1"}};
  sweep(explicit_requests, "r.toml", {"--backend", "unit", "--policy", "chunked-prefill"}, "--trace");
  const std::string trace = write("t.csv", "arrival,prompt_tokens,output_tokens\n0,5,2\n0.5,7,1\n2,3,4\n");
  const std::vector<Line> replay = {{"replay", "path", "'" + trace + "'"}, {"replay", "limit", "10"},
                                    {"replay", "rate", "2.0"}};
  sweep(replay, "p.toml", {"--backend", "unit"}, "--trace");
  const std::vector<Line> scaled = {{"replay", "path", "'" + trace + "'"},
                                    {"replay", "time_scale", "3.0"}};
  sweep(scaled, "q.toml", {"--backend", "unit"}, "--trace");
}

TEST_F(BadInputs, HardwareFiles) {
  const std::vector<Line> hardware = {
      {"", "name", "'gpu'"},                   {"", "memory_gib", "80"},
      {"", "memory_bandwidth_gbs", "2039"},    {"", "fp16_tflops", "312"},
      {"", "fp8_tflops", "0"},                 {"", "fp32_tflops", "19.5"},
      {"", "interconnect_gbs", "300"},         {"", "interconnect_latency_us", "5"},
      {"", "gemm_efficiency", "0.7"},          {"", "memory_efficiency", "0.75"},
      {"", "attention_efficiency", "0.6"},     {"", "overhead_us", "100"},
      {"", "gemm_half_rows", "128"},          {"", "price_per_hour_usd", "3.43"},
      {"", "gemm_tile_rows", "128"},          {"", "attention_sequence_us", "1.2"},
      {"", "prefill_self_attention_efficiency", "0.15"}};
  const std::string w = write("w.toml", "[generate]\nrequests = 10\n[generate.arrival]\nprocess = "
                                        "'poisson'\nrate = 4.0\n[generate.prompt_tokens]\ndist = "
                                        "'fixed'\nvalue = 200\n[generate.output_tokens]\ndist = "
                                        "'fixed'\nvalue = 20\n");
  sweep(hardware, "hw.toml", {"--trace", w, "--policy", "chunked-prefill"}, "--hardware");
}

TEST_F(BadInputs, ModelConfigs) {
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"hidden_size", "4096"},        {"intermediate_size", "14336"}, {"num_hidden_layers", "32"},
      {"num_attention_heads", "32"},  {"num_key_value_heads", "8"},   {"head_dim", "128"},
      {"vocab_size", "128256"},       {"max_position_embeddings", "8192"},
      {"rope_theta", "500000.0"},     {"rms_norm_eps", "1e-5"},       {"sliding_window", "null"},
      {"num_local_experts", "1"},     {"num_experts_per_tok", "1"},   {"torch_dtype", "\"bfloat16\""},
      {"tie_word_embeddings", "false"}, {"architectures", "[\"LlamaForCausalLM\"]"}};
  const std::string w = write("w.toml", "[[request]]\nprompt_tokens = 100\noutput_tokens = 5\n");
  for (const auto& [target, unused] : keys) {
    for (const std::string& v : kJsonValues) {
      std::string json = "{";
      for (const auto& [key, value] : keys) {
        json += (json.size() > 1 ? ", " : "") + ("\"" + key + "\": ") + (key == target ? v : value);
      }
      json += "}";
      const std::string model = write("config.json", json);
      check({"--trace", w, "--model", model}, target, target + " = " + v);
    }
  }
}

TEST_F(BadInputs, RunConfiguration) {
  const std::string w = write("w.toml", "[[request]]\nprompt_tokens = 100\noutput_tokens = 5\n"
                                        "[[request]]\narrival = 1\nprompt_tokens = 10\n"
                                        "output_tokens = 2\n");
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"max_num_seqs", "chunked-prefill"},      {"max_num_batched_tokens", "chunked-prefill"},
      {"max_tokens", "chunked-prefill"},        {"gpu_memory_utilization", "chunked-prefill"},
      {"tp", "chunked-prefill"},                {"replicas", "continuous"},
      {"seed", "continuous"},                   {"kv.block_size", "prefix-cached"},
      {"kv.blocks", "prefix-cached"},           {"policy.max_wait", "static"},
      {"policy.long_prefill_token_threshold", "chunked-prefill"},
      {"policy.scheduler_reserve_full_isl", "chunked-prefill"},
      {"request_rate", "continuous"},           {"burstiness", "continuous"},
      {"time_scale", "continuous"},             {"num_prompts", "continuous"},
      {"max_concurrency", "chunked-prefill"},   {"price_per_hour_usd", "continuous"},
      {"goodput.ttft", "continuous"},           {"goodput.e2el", "continuous"}};
  for (const auto& [key, policy] : keys) {
    for (const std::string& v : kTomlValues) {
      check({"--trace", w, "--policy", policy, "--set", key + "=" + v}, key.substr(key.find('.') + 1),
            key + " = " + v);
    }
  }
}

}  // namespace
}  // namespace servesim
