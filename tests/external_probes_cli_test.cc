// `sim search --probes-external` end to end: its stdin and stdout piped to the test as
// scripts/ray_search.py pipes them, the probes run by tests/external_probes_fixture.h's parent.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "runner/external_probes.h"
#include "tests/external_probes_fixture.h"

namespace servesim {
namespace {

using namespace probes_testing;

// `sim search --probes-external` itself, its stdin and stdout piped to this test as ray_search.py
// pipes them: the table and the answer it prints equal those of `sim search` with the same -j.
class ExternalProbesCliTest : public ExternalProbesTest {
 protected:
  std::vector<std::string> search_args(const std::string& db_name) const {
    return {"search", "--trace", workload_, "--policy", "chunked-prefill", "--slo", "p99_ttft=1s",
            "--start-rate", "2", "--precision", "0.05", "-j", "2", "--db", db(db_name)};
  }
  // The output of `sim ARGS` (stdout only), and its exit status.
  std::pair<std::string, int> run_local(const std::vector<std::string>& args) const {
    std::string cmd = servesim::testing::quote(servesim::testing::kSim);
    for (const std::string& a : args) cmd += " " + shell_quote(a);
    FILE* f = popen((cmd + " 2>/dev/null").c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    const int st = pclose(f);
    return {out, WIFEXITED(st) ? WEXITSTATUS(st) : -1};
  }
};

// Lines but the one with the wall time and the database's path.
std::string without_timing(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.find(" probes in ") == std::string::npos) out += line + "\n";
  }
  return out;
}

TEST_F(ExternalProbesCliTest, SimSearchThroughPipesPrintsTheLocalTable) {
  const auto [local, local_status] = run_local(search_args("local.db"));
  ASSERT_EQ(local_status, 0) << local;
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  std::vector<std::string> args = search_args("external.db");
  args.push_back("--probes-external");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
    std::vector<char*> argv = {const_cast<char*>(servesim::testing::kSim.c_str())};
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  FILE* from = ::fdopen(from_child[0], "r");
  SimRunParent p = parent();
  std::string printed;
  char* line = nullptr;
  size_t cap = 0;
  ssize_t len;
  while ((len = ::getline(&line, &cap, from)) > 0) {
    std::string text(line, static_cast<size_t>(len));
    if (text.rfind(std::string(kProbesLinePrefix), 0) != 0) {
      printed += text;
      continue;
    }
    text.pop_back();
    const std::string answer = p(text) + "\n";
    ASSERT_EQ(::write(to_child[1], answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
  }
  std::free(line);
  std::fclose(from);
  ::close(to_child[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << printed;
  EXPECT_GE(p.requests.size(), 3u);
  EXPECT_NE(printed.find("Answer: max request_rate"), std::string::npos) << printed;
  EXPECT_EQ(without_timing(printed), without_timing(local));
}

// No parent on the other end (stdin at its end): the search stops at once, unanswered, exit 1.
TEST_F(ExternalProbesCliTest, WithoutAParentTheSearchStopsUnanswered) {
  std::vector<std::string> args = search_args("alone.db");
  args.push_back("--probes-external");
  std::string cmd = servesim::testing::quote(servesim::testing::kSim);
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  FILE* f = popen((cmd + " </dev/null 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int st = pclose(f);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 1) << out;
  EXPECT_NE(out.find(std::string(kProbesLinePrefix) + "{\"probes\":[{\"config\":"), std::string::npos) << out;
  EXPECT_NE(out.find("Answer: not answered: the probes could not be run (the probe driver closed its end (stdin) "
                     "without answering)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("sim search: the probe driver closed its end"), std::string::npos) << out;
  EXPECT_EQ(query(db("alone.db"), "SELECT status FROM sweeps"), "interrupted");
}


}  // namespace
}  // namespace servesim
