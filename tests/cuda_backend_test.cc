// The cuda backend from the command line. Without a GPU (or without a CUDA toolkit at build time)
// it must refuse clearly; with one, it runs every policy on the tiny model.
#include <gtest/gtest.h>

#include "policies/registry.h"
#include "tests/cli_harness.h"
#ifdef SERVESIM_HAVE_CUDA
#include "kernels/cuda/cuda_runner.h"
#endif

namespace servesim::testing {
namespace {

bool have_gpu() {
#ifdef SERVESIM_HAVE_CUDA
  return cuda_device_available();
#else
  return false;
#endif
}

using CudaBackendCli = Cli;

TEST_F(CudaBackendCli, WithoutAGpuItIsAClearInputError) {
  if (have_gpu()) GTEST_SKIP() << "a CUDA device is present";
  const Outcome o = sim({"--backend", "cuda", "--trace", "seed-toy.toml"});
  EXPECT_EQ(o.status, 2);
  EXPECT_TRUE(o.output.find("no CUDA device") != std::string::npos ||
              o.output.find("not built") != std::string::npos)
      << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "sim.db"));
}

TEST_F(CudaBackendCli, EveryPolicyRunsTheTinyModelOnTheGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  for (const PolicyInfo& p : policy_registry()) {
    const Outcome o = sim({"--backend", "cuda", "--model", kData + "/models/tiny.json", "--policy",
                           std::string(p.name), "--trace", "multiturn.toml", "--set", "max_tokens=16"});
    ASSERT_EQ(o.status, 0) << p.name << ": " << o.output;
    EXPECT_EQ(query("SELECT count(*) FROM iterations WHERE predicted IS NULL AND run_id = (SELECT max(id) FROM runs)"), "0");
  }
}

}  // namespace
}  // namespace servesim::testing
