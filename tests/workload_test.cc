// Tests of workloads/workload.h: explicit and generated workloads, determinism, and every message a
// user can get from a bad workload file (each must name the file, the line and the key).
#include "workloads/workload.h"

#include <gtest/gtest.h>

#include "sim/config/toml_fields.h"
#include "tests/test_util.h"

#include <string>
#include <vector>

#ifndef SERVESIM_SOURCE_DATA_DIR
#define SERVESIM_SOURCE_DATA_DIR "data"  // when built outside CMake, from the repository root
#endif

namespace servesim {
namespace {

using namespace servesim::testing;

const std::string kDataDir = SERVESIM_SOURCE_DATA_DIR;

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

std::vector<std::string> ids(const Workload& w) {
  std::vector<std::string> out;
  for (const RequestSpec& r : w.requests) out.push_back(r.id);
  return out;
}

// A [generate] workload with the given seed line and prompt distribution.
std::string generated(const std::string& seed_line, const std::string& prompt_dist) {
  return "[generate]\nrequests = 200\n" + seed_line +
         "\n[generate.arrival]\nprocess = 'poisson'\nrate = 4\n"
         "[generate.prompt_tokens]\n" + prompt_dist +
         "\n[generate.output_tokens]\ndist = 'pareto'\nshape = 1.5\nscale = 20\nmax = 4096\n";
}

TEST(Workload, SeedToyFile) {
  auto loaded = load_workload(kDataDir + "/workloads/seed-toy.toml", std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Workload& w = loaded.value();
  EXPECT_EQ(w.seed, 0u);
  EXPECT_EQ(ids(w), (std::vector<std::string>{"A", "B", "C", "D", "E"}));
  const Time arrival[] = {0, 0, 0, 2 * kNsPerSecond, 4 * kNsPerSecond};
  const int32_t output[] = {3, 8, 5, 4, 3};
  for (size_t i = 0; i < 5; ++i) {
    const RequestSpec& r = w.requests[i];
    EXPECT_EQ(r.arrival, arrival[i]) << r.id;
    EXPECT_EQ(r.output_tokens, output[i]) << r.id;
    EXPECT_EQ(r.prompt_tokens, 1) << r.id;
    EXPECT_EQ(r.max_tokens, 0) << r.id;
    EXPECT_GT(r.line, i == 0 ? 0 : w.requests[i - 1].line) << r.id;
  }
}

TEST(Workload, DefaultsAndFractionalSeconds) {
  const Workload w = parse_ok(R"(
[[request]]
output_tokens = 4
[[request]]
arrival = 0.25
prompt_tokens = 16
output_tokens = 300
max_tokens = 256
)");
  ASSERT_EQ(w.requests.size(), 2u);
  EXPECT_EQ(ids(w), (std::vector<std::string>{"r0", "r1"}));
  EXPECT_EQ(w.path, "w.toml");
  const RequestSpec& a = w.requests[0];
  EXPECT_EQ(a.arrival, 0);
  EXPECT_EQ(a.prompt_tokens, 1);
  EXPECT_EQ(a.max_tokens, 0);
  EXPECT_EQ(a.line, 2);
  const RequestSpec& b = w.requests[1];
  EXPECT_EQ(b.arrival, 250'000'000);
  EXPECT_EQ(b.prompt_tokens, 16);
  EXPECT_EQ(b.output_tokens, 300);  // above max_tokens: allowed, the simulator caps it
  EXPECT_EQ(b.max_tokens, 256);
  EXPECT_EQ(b.line, 4);
}

TEST(Workload, SortedByArrivalWithTiesInFileOrder) {
  const Workload w = parse_ok(R"(
request = [
  { id = "a", arrival = 5, output_tokens = 1 },
  { id = "b", arrival = 1, output_tokens = 1 },
  { id = "c", arrival = 5, output_tokens = 1 },
  { id = "d", arrival = 1, output_tokens = 1 },
  { id = "e", arrival = 0, output_tokens = 1 },
]
)");
  EXPECT_EQ(ids(w), (std::vector<std::string>{"e", "b", "d", "a", "c"}));
}

TEST(Workload, GeneratedRequests) {
  const Workload w = parse_ok(R"(
[generate]
requests = 100
seed = 3
max_tokens = 64
[generate.arrival]
process = "constant"
rate = 2
[generate.output_tokens]
dist = "uniform"
min = 1
max = 100
)");
  EXPECT_EQ(w.seed, 3u);
  ASSERT_EQ(w.requests.size(), 100u);
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const RequestSpec& r = w.requests[i];
    EXPECT_EQ(r.id, "r" + std::to_string(i));
    EXPECT_EQ(r.arrival, static_cast<Time>(i) * kNsPerSecond / 2);
    EXPECT_EQ(r.prompt_tokens, 1);  // no [generate.prompt_tokens]: fixed 1
    EXPECT_GE(r.output_tokens, 1);
    EXPECT_LE(r.output_tokens, 100);
    EXPECT_EQ(r.max_tokens, 64);
    EXPECT_EQ(r.line, 0);
  }
}

TEST(Workload, SameSeedSameRequestsOtherSeedOthers) {
  const std::string text = generated("seed = 7", "dist = 'lognormal'\nmedian = 500\nsigma = 1");
  const Workload a = parse_ok(text);
  const Workload b = parse_ok(text);
  ASSERT_EQ(a.requests.size(), 200u);
  const auto same = [](const Workload& x, const Workload& y) {
    for (size_t i = 0; i < x.requests.size(); ++i) {
      const RequestSpec& p = x.requests[i];
      const RequestSpec& q = y.requests[i];
      if (p.id != q.id || p.arrival != q.arrival || p.prompt_tokens != q.prompt_tokens ||
          p.output_tokens != q.output_tokens) {
        return false;
      }
    }
    return x.requests.size() == y.requests.size();
  };
  EXPECT_TRUE(same(a, b));
  EXPECT_FALSE(same(a, parse_ok(generated("seed = 8", "dist = 'lognormal'\nmedian = 500\nsigma = 1"))));
  // --seed replaces the file's seed.
  const Workload overridden = parse_ok(generated("seed = 8", "dist = 'lognormal'\nmedian = 500\nsigma = 1"), 7);
  EXPECT_EQ(overridden.seed, 7u);
  EXPECT_TRUE(same(a, overridden));
  EXPECT_EQ(parse_ok(generated("", "dist = 'fixed'\nvalue = 2")).seed, 0u);  // default seed
}

TEST(Workload, EachDistributionHasItsOwnStream) {
  const Workload a = parse_ok(generated("seed = 1", "dist = 'fixed'\nvalue = 10"));
  const Workload b = parse_ok(generated("seed = 1", "dist = 'zipf'\nexponent = 1.1\nn = 1000"));
  ASSERT_EQ(a.requests.size(), b.requests.size());
  bool prompts_differ = false;
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].arrival, b.requests[i].arrival);
    EXPECT_EQ(a.requests[i].output_tokens, b.requests[i].output_tokens);
    prompts_differ = prompts_differ || a.requests[i].prompt_tokens != b.requests[i].prompt_tokens;
  }
  EXPECT_TRUE(prompts_differ);
}

TEST(Workload, DurationStopsBeforeT) {
  const Workload constant = parse_ok(R"(
[generate]
duration = 1
[generate.arrival]
process = "constant"
rate = 3
[generate.output_tokens]
dist = "fixed"
value = 1
)");
  ASSERT_EQ(constant.requests.size(), 3u);  // 0, 1/3, 2/3; the one at exactly 1 s is not sent
  EXPECT_EQ(constant.requests[2].arrival, 666'666'667);

  const Workload poisson = parse_ok(R"(
[generate]
duration = 100.0
seed = 5
[generate.arrival]
process = "poisson"
rate = 5
[generate.output_tokens]
dist = "fixed"
value = 1
)");
  EXPECT_NEAR(static_cast<double>(poisson.requests.size()), 500.0, 90.0);  // 4 sigma
  for (const RequestSpec& r : poisson.requests) ASSERT_LT(r.arrival, 100 * kNsPerSecond);
}

TEST(Workload, ShippedParetoWorkload) {
  auto loaded = load_workload(kDataDir + "/workloads/pareto.toml", std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Workload& w = loaded.value();
  EXPECT_EQ(w.seed, 42u);
  ASSERT_EQ(w.requests.size(), 1000u);
  double prompt_sum = 0.0;
  for (const RequestSpec& r : w.requests) {
    ASSERT_GE(r.prompt_tokens, 4);
    ASSERT_LE(r.prompt_tokens, 8192);
    ASSERT_GE(r.output_tokens, 20);
    ASSERT_LE(r.output_tokens, 4096);
    prompt_sum += r.prompt_tokens;
  }
  EXPECT_NEAR(prompt_sum / 1000.0, 1000.0, 150.0);
  EXPECT_NEAR(to_seconds(w.requests.back().arrival), 250.0, 40.0);  // 1000 at 4 req/s
}

TEST(Workload, ShippedParetoWorkloadGolden) {
  // The first requests of pareto.toml, pinned: a change here means the same file and seed no longer
  // give the same requests (a new engine, sampler, stream constant, or platform libm difference).
  auto loaded = load_workload(kDataDir + "/workloads/pareto.toml", std::nullopt);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const RequestSpec golden[] = {
      {"r0", 0, 832, 52, 0, 0},
      {"r1", 352'927'653, 400, 27, 0, 0},
      {"r2", 679'305'594, 270, 31, 0, 0},
      {"r3", 1'016'159'148, 295, 38, 0, 0},
  };
  for (size_t i = 0; i < 4; ++i) {
    const RequestSpec& r = loaded.value().requests[i];
    EXPECT_EQ(r.id, golden[i].id);
    EXPECT_EQ(r.arrival, golden[i].arrival) << r.id;
    EXPECT_EQ(r.prompt_tokens, golden[i].prompt_tokens) << r.id;
    EXPECT_EQ(r.output_tokens, golden[i].output_tokens) << r.id;
  }
}

// Every generator's requests keep the two promises the simulator relies on: a prompt's segments add
// up to its prompt_tokens (an empty prompt is the request's own), and the order of workload.h
// (parents first; the independent requests by arrival).
TEST(Workload, EveryGeneratorKeepsSegmentsAndOrder) {
  const std::string tail =
      "[generate.arrival]\nprocess = 'gamma'\nrate = 3\ncv = 2\n[generate.prompt_tokens]\n"
      "dist = 'pareto'\nshape = 1.2\nscale = 30\nmax = 20000\n[generate.output_tokens]\n"
      "dist = 'zipf'\nexponent = 1.1\nn = 3000\n";
  const std::string prefixes = "[generate.prefixes]\nshare = 0.7\ncount = 4\ntokens = 333\n";
  const std::string sessions = "[generate.sessions]\nthink_time = 1\n[generate.sessions.turns]\n"
                               "dist = 'uniform'\nmin = 1\nmax = 7\n";
  std::vector<Workload> workloads = {
      parse_ok("[generate]\nrequests = 500\nseed = 9\n" + tail),
      parse_ok("[generate]\nrequests = 500\nseed = 9\nmax_tokens = 64\n" + tail + prefixes),
      parse_ok("[generate]\nrequests = 200\nseed = 9\n" + tail + sessions),
      parse_ok("[generate]\nduration = 60\nseed = 9\n" + tail + sessions + prefixes),
      parse_ok("[generate]\nrequests = 200\nseed = 9\n" + tail + prefixes +
               "[generate.sessions]\nshare_history = false\n[generate.sessions.turns]\n"
               "dist = 'fixed'\nvalue = 3\n"),
      parse_ok(R"(
[[prefix]]
id = "p"
tokens = 100
[[request]]
id = "b"
after = ["a"]
prefix = "p"
prompt_tokens = 5
output_tokens = 1
[[request]]
id = "a"
arrival = 3
prefix = "p"
output_tokens = 1
[[request]]
id = "c"
arrival = 1
output_tokens = 1
)")};
  for (const char* file : {"/workloads/seed-toy.toml", "/workloads/pareto.toml",
                           "/workloads/shared-prefix.toml", "/workloads/multiturn.toml"}) {
    auto loaded = load_workload(kDataDir + file, std::nullopt);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    workloads.push_back(std::move(loaded).value());
  }
  for (const Workload& w : workloads) {
    ASSERT_FALSE(w.requests.empty()) << w.path;
    bool dependents = false;
    for (size_t i = 0; i < w.requests.size(); ++i) {
      const RequestSpec& r = w.requests[i];
      if (!r.prompt.empty()) {
        int64_t sum = 0;
        for (const Segment& seg : r.prompt) sum += seg.tokens;
        ASSERT_EQ(sum, r.prompt_tokens) << w.path << " " << r.id;
      }
      for (int32_t p : r.after) ASSERT_LT(static_cast<size_t>(p), i) << w.path << " " << r.id;
      if (r.after.empty()) {
        ASSERT_FALSE(dependents) << w.path << " " << r.id;
        if (i > 0) {
          ASSERT_GE(r.arrival, w.requests[i - 1].arrival) << w.path << " " << r.id;
        }
      } else {
        dependents = true;
      }
    }
  }
  // Without prefixes or sessions, requests are as before: their own prompts, no dependencies.
  for (const RequestSpec& r : workloads[0].requests) {
    ASSERT_TRUE(r.prompt.empty() && r.after.empty() && r.output_id == 0 && r.think_time == 0);
  }
  EXPECT_EQ(ids(workloads[5]), (std::vector<std::string>{"c", "a", "b"}));
  EXPECT_EQ(workloads[5].requests[2].prompt_tokens, 105);
}

TEST(WorkloadErrors, ExplicitRequestValues) {
  EXPECT_EQ(parse_error(R"(# three requests
[[request]]
output_tokens = 1
[[request]]
output_tokens = 2
[[request]]
output_tokens = -3
)"),
            "w.toml:7:17: request[2].output_tokens: expected an integer from 1 to 100000000, got -3");
  EXPECT_EQ(parse_error("[[request]]\noutput_tokens = 3.0\n"),
            "w.toml:2:17: request[0].output_tokens: expected an integer from 1 to 100000000, got 3.0");
  EXPECT_EQ(parse_error("[[request]]\noutput_tokens = 3\nprompt_tokens = 3000000000\n"),
            "w.toml:3:17: request[0].prompt_tokens: expected an integer from 1 to 100000000, got "
            "3000000000");
  EXPECT_EQ(parse_error("[[request]]\narrival = 'soon'\noutput_tokens = 3\n"),
            "w.toml:2:11: request[0].arrival: expected a number >= 0, got \"soon\"");
  EXPECT_EQ(parse_error("[[request]]\narrival = -1\noutput_tokens = 3\n"),
            "w.toml:2:11: request[0].arrival: expected a number >= 0, got -1");
  EXPECT_EQ(parse_error("[[request]]\nid = ''\noutput_tokens = 3\n"),
            "w.toml:2:6: request[0].id: expected a non-empty string, got \"\"");
  EXPECT_EQ(parse_error("[[request]]\noutput_tokens = 3\nmax_tokens = 0\n"),
            "w.toml:3:14: request[0].max_tokens: expected an integer from 1 to 100000000, got 0");
}

TEST(WorkloadErrors, MissingAndUnknownKeys) {
  EXPECT_EQ(parse_error("[[request]]\noutput_tokens = 1\n[[request]]\narrival = 2\n"),
            "w.toml:3:1: request[1]: missing required key 'output_tokens'");
  EXPECT_EQ(parse_error("# a typo\n\n\n[[request]]\noutptu_tokens = 1\n"),
            "w.toml:5:1: request[0].outptu_tokens: unknown key (known: id, arrival, "
            "prompt_tokens, output_tokens, max_tokens, priority, prefix, after, think_time)");
}

TEST(WorkloadErrors, DuplicateIdsNameBothLines) {
  EXPECT_EQ(parse_error("[[request]]\nid = 'A'\noutput_tokens = 1\n\n[[request]]\nid = 'A'\n"
                        "output_tokens = 2\n"),
            "w.toml:6:6: request[1].id: duplicate id 'A' (also the id of request[0] on line 1)");
  EXPECT_EQ(parse_error("[[request]]\nid = 'r1'\noutput_tokens = 1\n[[request]]\noutput_tokens = 2\n"),
            "w.toml:4:1: request[1]: its default id 'r1' is already the id of request[0] on line "
            "1; give it an explicit id");
}

TEST(WorkloadErrors, FileStructure) {
  EXPECT_TRUE(Contains(parse_error("[[request]]\noutput_tokens = \n"), "w.toml:2:"));
  EXPECT_TRUE(Contains(parse_error("[[request]]\noutput_tokens = \n"), "malformed TOML: "));
  EXPECT_EQ(parse_error(""),
            "w.toml: no workload: expected [[request]] entries, a [generate] table or a [replay] "
            "table");
  EXPECT_EQ(parse_error("# nothing\nseed = 3\n"),
            "w.toml:2:1: seed: unknown key (known: request, prefix, generate, replay)");
  EXPECT_EQ(parse_error("[[request]]\noutput_tokens = 1\n[generate]\nrequests = 3\n"),
            "w.toml:3:1: generate: a workload has exactly one of [[request]] entries, [generate] "
            "or [replay]; this file also has [[request]] on line 1");
  EXPECT_EQ(parse_error("\n\n[replay]\npath = 'trace.csv'\n"),
            "trace.csv: cannot open file (no such file) (the trace of [replay] at w.toml:3:1)");
  EXPECT_TRUE(Contains(parse_error("[request]\noutput_tokens = 1\n"),
                       "w.toml:1:1: request: expected [[request]] entries (an array of tables), "
                       "got a single [request] table"));
  EXPECT_EQ(parse_error("request = []\n"),
            "w.toml:1:11: request: expected [[request]] entries (an array of tables), got an "
            "empty array");
  EXPECT_EQ(parse_error("[[generate]]\nrequests = 3\n"),
            "w.toml:1:1: generate: expected a [generate] table, got an array");
}

TEST(WorkloadErrors, Files) {
  auto missing = load_workload("/nonexistent/w.toml", std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, "/nonexistent/w.toml: cannot open file (no such file)");
  auto directory = load_workload(kDataDir, std::nullopt);
  ASSERT_FALSE(directory.ok());
  EXPECT_TRUE(Contains(directory.error().message, "cannot open file (it is a directory)"));
  // A device is refused before a byte is read (it would never end).
  auto device = load_workload("/dev/zero", std::nullopt);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().message,
            "/dev/zero: cannot open file (it is not a regular file: a device, a pipe or a socket)");
  // A file larger than the cap is refused, not read into memory.
  const std::string big = write_temp("big.toml", std::string(kMaxTextFileBytes + 1, '#'));
  auto huge = load_workload(big, std::nullopt);
  ASSERT_FALSE(huge.ok());
  EXPECT_TRUE(Contains(huge.error().message, "the most this reads is 67108864")) << huge.error().message;
}

TEST(WorkloadErrors, GenerateTable) {
  const std::string tail =
      "[generate.arrival]\nprocess = 'poisson'\nrate = 1\n[generate.output_tokens]\n"
      "dist = 'fixed'\nvalue = 1\n";
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\nduration = 10\n" + tail),
            "w.toml:3:12: generate.duration: give either requests or duration, not both");
  EXPECT_EQ(parse_error("[generate]\nseed = 1\n" + tail),
            "w.toml:1:1: generate: missing required key 'requests' or 'duration' (give exactly "
            "one)");
  EXPECT_EQ(parse_error("[generate]\nrequests = 0\n" + tail),
            "w.toml:2:12: generate.requests: expected an integer from 1 to 10000000, got 0");
  EXPECT_EQ(parse_error("[generate]\nduration = 0\n" + tail),
            "w.toml:2:12: generate.duration: expected a number > 0, got 0");
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\nseed = -1\n" + tail),
            "w.toml:3:8: generate.seed: expected an integer >= 0, got -1");
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\nrate = 5\n" + tail),
            "w.toml:3:1: generate.rate: unknown key (known: requests, duration, seed, max_tokens, "
            "arrival, prompt_tokens, output_tokens, prefixes, sessions, priority)");
  EXPECT_EQ(parse_error("[generate]\nduration = 1e6\n[generate.arrival]\nprocess = 'poisson'\n"
                        "rate = 1000\n[generate.output_tokens]\ndist = 'fixed'\nvalue = 1\n"),
            "w.toml:2:12: generate.duration: yields more than 10000000 requests at this rate; "
            "lower generate.arrival.rate or duration");
  EXPECT_TRUE(Contains(parse_error("[generate]\nrequests = 3\n[generate.extra]\nx = 1\n" + tail),
                       "w.toml:3:1: generate.extra: unknown key"));
}

TEST(WorkloadErrors, GenerateSubTables) {
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\n[generate.output_tokens]\ndist = 'fixed'\n"
                        "value = 1\n"),
            "w.toml:1:1: generate: missing required table [generate.arrival] (with process = "
            "\"poisson\", \"gamma\", \"constant\" or \"all-at-once\")");
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\n[generate.arrival]\nprocess = 'all-at-once'\n"),
            "w.toml:1:1: generate: missing required table [generate.output_tokens] (for example "
            "dist = \"fixed\", value = 128)");
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\narrival = 'poisson'\n"),
            "w.toml:3:11: generate.arrival: expected a table ([generate.arrival]), got "
            "\"poisson\"");
  EXPECT_EQ(parse_error("[generate]\nduration = 5\n[generate.arrival]\nprocess = 'all-at-once'\n"
                        "[generate.output_tokens]\ndist = 'fixed'\nvalue = 1\n"),
            "w.toml:2:12: generate.duration: cannot be used with process = \"all-at-once\" (every "
            "request arrives at 0); give requests = N instead");
  // Errors inside the sub-tables carry their full dotted key and their own line.
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\n[generate.arrival]\nrate = 0\nprocess = "
                        "'poisson'\n[generate.output_tokens]\ndist = 'fixed'\nvalue = 1\n"),
            "w.toml:4:8: generate.arrival.rate: expected a number > 0, got 0");
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\n[generate.arrival]\nprocess = 'poisson'\n"
                        "rate = 1\n\n\n[generate.output_tokens]\ndist = 'gauss'\n"),
            "w.toml:9:8: generate.output_tokens.dist: unknown distribution 'gauss' (known: fixed, "
            "uniform, normal, lognormal, pareto, zipf)");
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\n[generate.arrival]\nprocess = 'poisson'\n"
                        "rate = 1\n[generate.output_tokens]\ndist = 'fixed'\nvalue = 1\n"
                        "[generate.prompt_tokens]\ndist = 'lognormal'\nmedian = 500\n"),
            "w.toml:9:1: generate.prompt_tokens: missing required key 'sigma'");
  EXPECT_EQ(parse_error("[generate]\nrequests = 3\n[generate.arrival]\nprocess = 'constant'\n"
                        "rate = 1e-9\n[generate.output_tokens]\ndist = 'fixed'\nvalue = 1\n"),
            "w.toml:2:12: generate.requests: arrivals run past 1e9 seconds at this rate; raise "
            "generate.arrival.rate or lower requests");
}

}  // namespace
}  // namespace servesim
