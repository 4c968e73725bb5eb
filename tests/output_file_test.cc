// OutputFile (sim/io/output_file.h): what a command may overwrite and how it writes; then every output
// of `sim` end to end: --html, calibrate --out, probe --out, validate --write-simulated and standard
// output refuse the database and any SQLite file, and report a failed write (a full device, a
// file-size limit) with exit 1 instead of printing "Wrote".
#include "sim/io/output_file.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/cli_harness.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servesim_output_file_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file starting with SQLite's header (what the check looks at), with `rest` after it.
  std::string sqlite_file(const std::string& name, const std::string& rest = "rows") const {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << std::string("SQLite format 3\0", 16) << rest;
    return p.string();
  }
  bool leftovers() const {
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().extension() == ".tmp") return true;
    }
    return false;
  }

  fs::path dir_;
};

TEST_F(OutputFileTest, TheDatabaseIsRefusedInEverySpelling) {
  const std::string db = sqlite_file("r.db");
  fs::create_symlink(db, dir_ / "link.db");
  fs::create_hard_link(db, dir_ / "hard.db");
  fs::create_directories(dir_ / "sub");
  for (const fs::path& spelling : {fs::path(db), dir_ / "." / "r.db", dir_ / "sub" / ".." / "r.db",
                                   dir_ / "link.db", dir_ / "hard.db"}) {
    OutputFile out("--html", spelling.string(), {{"--db", db}});
    const Status s = out.write("<html>");
    ASSERT_FALSE(s.ok()) << spelling;
    EXPECT_FALSE(out.write_failed());  // bad input, not a failed write
    EXPECT_NE(s.error().message.find("--html " + spelling.string()), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("--db " + db), std::string::npos) << s.error().message;
  }
  EXPECT_EQ(read_all(db), std::string("SQLite format 3\0rows", 20));
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.db"));
}

TEST_F(OutputFileTest, ADatabaseThatDoesNotExistYetAndItsJournalsAreRefused) {
  // `sim validate --db new.db --write-simulated ./new.db`: the run creates the database later.
  const std::string db = (dir_ / "new.db").string();
  for (const std::string& path : {(dir_ / "." / "new.db").string(), db + "-wal", db + "-journal"}) {
    OutputFile out("--write-simulated", path, {{"--db", db}});
    EXPECT_FALSE(out.check().ok()) << path;
  }
  EXPECT_TRUE(OutputFile("--write-simulated", (dir_ / "new.json").string(), {{"--db", db}}).check().ok());
}

TEST_F(OutputFileTest, AnySqliteFileIsRefused) {
  const std::string other = sqlite_file("other.db");
  OutputFile out("--out", other);
  const Status s = out.write("name = \"x\"\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("--out " + other + ": that is a SQLite database"), std::string::npos)
      << s.error().message;
  EXPECT_EQ(read_all(other), std::string("SQLite format 3\0rows", 20));
  // A text file that only mentions SQLite is an ordinary file.
  const fs::path text = dir_ / "notes.txt";
  std::ofstream(text) << "SQLite format 3 is what the database says";
  EXPECT_TRUE(OutputFile("--out", text.string()).write("new").ok());
  EXPECT_EQ(read_all(text), "new");
}

TEST_F(OutputFileTest, ReplacesAFileWholeKeepingItsPermissionsAndTheSymlinkToIt) {
  const fs::path target = dir_ / "page.html", link = dir_ / "latest.html";
  std::ofstream(target) << "old";
  fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::create_symlink(target, link);
  OutputFile out("--html", link.string());
  ASSERT_TRUE(out.write("new page").ok());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_all(target), "new page");
  EXPECT_EQ(fs::status(target).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_FALSE(leftovers());
  // A new file.
  ASSERT_TRUE(OutputFile("--out", (dir_ / "new.toml").string()).write("a = 1\n").ok());
  EXPECT_EQ(read_all(dir_ / "new.toml"), "a = 1\n");
}

TEST_F(OutputFileTest, AFullDeviceIsAFailedWriteAndTheDeviceStaysADevice) {
  ASSERT_TRUE(fs::is_character_file("/dev/full"));
  OutputFile full("--html", "/dev/full");
  const Status s = full.write(std::string(1 << 16, 'x'));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(full.write_failed());
  EXPECT_EQ(s.error().message, "writing /dev/full failed: No space left on device");
  // Written in place, never renamed over (as root, a rename would replace the device node).
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  OutputFile null("--html", "/dev/null");
  EXPECT_TRUE(null.write("page").ok());
  EXPECT_FALSE(null.write_failed());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

// Under `ulimit -f` (with SIGXFSZ ignored, as `sim` does): EFBIG, the old file kept, no temporary.
TEST_F(OutputFileTest, AFileSizeLimitIsAFailedWriteThatKeepsTheOldFile) {
  const fs::path path = dir_ / "page.html";
  std::ofstream(path) << "old";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    OutputFile out("--html", path.string());
    const Status s = out.write(std::string(100000, 'x'));
    const bool expected = !s.ok() && out.write_failed() &&
                          s.error().message == "writing " + path.string() + " failed: File too large";
    ::_exit(expected ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_all(path), "old");
  EXPECT_FALSE(leftovers());
}

TEST_F(OutputFileTest, FoldersThatCannotTakeTheFileAreBadInput) {
  OutputFile missing("--out", (dir_ / "no" / "such" / "x.toml").string());
  Status s = missing.check();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cannot write --out " + missing.path() + ": no directory " +
                                   (dir_ / "no" / "such").string()),
            std::string::npos)
      << s.error().message;
  s = OutputFile("--out", dir_.string()).check();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("is a directory"), std::string::npos) << s.error().message;
  EXPECT_FALSE(OutputFile("--out", "").check().ok());
}

}  // namespace
}  // namespace servesim

namespace servesim::testing {
namespace {

// The commands of `sim` that write a file besides the database, and standard output.
class OutputFilesCli : public Cli {
 protected:
  // `sim ARGS` in the test's folder through the shell, so that `redirect` can send its output
  // somewhere (" > /dev/full"), after `before` (a ulimit); stderr is captured.
  Outcome shell(const std::string& before, const std::vector<std::string>& args, const std::string& redirect) const {
    std::string cmd = "cd " + quote(dir_.string()) + " && (" + before + " exec " + quote(kSim);
    for (const std::string& a : args) cmd += " " + quote(a);
    cmd += redirect + ") 2>&1";
    Outcome o{-1, ""};
    FILE* p = popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) o.output.append(buf, n);
    const int st = pclose(p);
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return o;
  }
  // A small run into `db`.
  void make_run(const std::string& db = "r.db") const {
    const Outcome o = sim({"--trace", kData + "/workloads/seed-toy.toml", "--backend", "unit", "--db", db});
    ASSERT_EQ(o.status, 0) << o.output;
  }
  std::string bytes(const std::string& name) const {
    std::ifstream in(dir_ / name, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST_F(OutputFilesCli, ReportHtmlRefusesTheDatabaseItReadsAndAnyOtherDatabase) {
  make_run();
  make_run("other.db");
  const std::string before = bytes("r.db");
  fs::create_symlink(dir_ / "r.db", dir_ / "alias.db");
  for (const std::string out : {"r.db", "./r.db", "alias.db"}) {
    const Outcome o = sim({"report", "--db", "r.db", "--html", out});
    EXPECT_EQ(o.status, 2) << o.output;
    EXPECT_NE(o.output.find("sim report: --html " + out + ": that is the file of --db r.db"), std::string::npos)
        << o.output;
    EXPECT_EQ(o.output.find("Wrote"), std::string::npos) << o.output;
  }
  const Outcome other = sim({"report", "--db", "r.db", "--html", "other.db"});
  EXPECT_EQ(other.status, 2) << other.output;
  EXPECT_NE(other.output.find("--html other.db: that is a SQLite database"), std::string::npos) << other.output;
  EXPECT_EQ(bytes("r.db"), before);
  EXPECT_EQ(query("SELECT count(*) FROM runs", "r.db"), "1");
  EXPECT_EQ(query("SELECT count(*) FROM runs", "other.db"), "1");
}

TEST_F(OutputFilesCli, CalibrateAndProbeRefuseADatabaseBeforeAnyWork) {
  make_run();
  const std::string before = bytes("r.db");
  Outcome o = sim({"calibrate", "--db", "r.db", "--out", "./r.db"});
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("sim calibrate: --out ./r.db: that is the file of --db r.db"), std::string::npos)
      << o.output;
  // Refused before the measurement (seconds) and before anything is read.
  o = sim({"probe", "--out", "r.db"});
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("sim probe: --out r.db: that is a SQLite database"), std::string::npos) << o.output;
  EXPECT_EQ(o.output.find("GFLOP/s"), std::string::npos) << o.output;
  EXPECT_EQ(bytes("r.db"), before);
}

TEST_F(OutputFilesCli, ValidateWriteSimulatedRefusesTheMeasuredResultAndTheDatabase) {
  const std::string result = std::string(SERVESIM_PROJECT_DIR) + "/tests/data/vllm/base.json";
  fs::copy_file(result, dir_ / "measured.json");
  const std::string before = bytes("measured.json");
  Outcome o = sim({"validate", "--vllm-result", "measured.json", "--write-simulated", "./measured.json"});
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("--write-simulated ./measured.json: that is the file of --vllm-result measured.json"),
            std::string::npos)
      << o.output;
  EXPECT_EQ(bytes("measured.json"), before);
  // The database the replay will create.
  o = sim({"validate", "--vllm-result", "measured.json", "--db", "v.db", "--write-simulated", "v.db"});
  EXPECT_EQ(o.status, 2) << o.output;
  EXPECT_NE(o.output.find("that is the file of --db v.db"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "v.db"));
}

TEST_F(OutputFilesCli, AFullDeviceFailsEveryOutputWithExitOneAndNoWrote) {
  make_run();
  Outcome o = sim({"report", "--db", "r.db", "--html", "/dev/full"});
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("sim report: writing /dev/full failed: No space left on device"), std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("Wrote"), std::string::npos) << o.output;
  EXPECT_TRUE(fs::is_character_file("/dev/full"));

  o = sim({"validate", "--vllm-result", std::string(SERVESIM_PROJECT_DIR) + "/tests/data/vllm/base.json",
           "--write-simulated", "/dev/full"});
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("sim validate: writing /dev/full failed: No space left on device"), std::string::npos)
      << o.output;

  // Standard output: a report, a list.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list", "runs", "--db", "r.db"}, {"report", "--db", "r.db"}, {"list", "policies"}}) {
    o = shell("", args, " > /dev/full");
    EXPECT_EQ(o.status, 1) << args[0] << ": " << o.output;
    EXPECT_NE(o.output.find("sim: writing standard output failed: No space left on device"), std::string::npos)
        << o.output;
  }
  // A command that already failed keeps its own status.
  o = shell("", {"report", "--db", "missing.db"}, " > /dev/full");
  EXPECT_EQ(o.status, 2) << o.output;
  // And the same commands to a working output exit 0.
  EXPECT_EQ(shell("", {"list", "runs", "--db", "r.db"}, " > /dev/null").status, 0);
}

TEST_F(OutputFilesCli, ProbeToAFullDeviceFails) {
  const Outcome o = sim({"probe", "--out", "/dev/full"});
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("sim probe: writing /dev/full failed: No space left on device"), std::string::npos)
      << o.output;
  EXPECT_EQ(o.output.find("GFLOP/s"), std::string::npos) << o.output;
}

// `ulimit -f`: no SIGXFSZ (exit 153, no message), but a failed write with a message.
TEST_F(OutputFilesCli, AFileSizeLimitIsAFailedWriteWithAMessage) {
  make_run();
  // The page inlines Chart.js (200 KB): past a 50 KiB limit.
  Outcome o = shell("ulimit -f 50;", {"report", "--db", "r.db", "--html", "page.html"}, "");
  EXPECT_EQ(o.status, 1) << o.output;
  EXPECT_NE(o.output.find("sim report: writing page.html failed: File too large"), std::string::npos) << o.output;
  EXPECT_FALSE(fs::exists(dir_ / "page.html"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // r.db alone

  // A run whose database grows past the limit: a message and a failure, not a signal.
  o = shell("ulimit -f 50;",
            {"--trace", kData + "/workloads/pareto.toml", "--num-prompts", "2000", "--db", "big.db"}, "");
  EXPECT_NE(o.status, 0) << o.output;
  EXPECT_NE(o.status, 128 + SIGXFSZ) << o.output;
  EXPECT_NE(o.output.find("big.db"), std::string::npos) << o.output;
}

}  // namespace
}  // namespace servesim::testing
