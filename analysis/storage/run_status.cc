#include "analysis/storage/run_status.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <fstream>
#include <sstream>

#include "analysis/storage/database.h"

namespace servesim {
namespace {

// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SS...Z", or -1.
int64_t parse_utc(const std::string& iso) {
  std::tm tm{};
  if (iso.size() < 19 || strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return -1;
  return static_cast<int64_t>(timegm(&tm));
}

// When process `pid` started, in seconds since the epoch, or -1 when /proc cannot tell.
int64_t process_start(int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return -1;
  // After the name: field 3 (state) onwards; starttime, in clock ticks since boot, is field 22.
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return -1;
  }
  std::ifstream proc_stat("/proc/stat");  // btime: the boot, in seconds since the epoch
  std::string key;
  int64_t btime = -1;
  while (proc_stat >> key && key != "btime") {}
  proc_stat >> btime;
  const long ticks = sysconf(_SC_CLK_TCK);
  if (btime < 0 || ticks <= 0) return -1;
  return btime + std::stoll(field) / ticks;
}

// Whether process `pid` has exited and waits to be reaped (state Z in /proc/PID/stat): alive to
// kill(), gone to anyone who asks whether it still runs.
bool is_zombie(int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z';
}

}  // namespace

std::string abandoned_reason(const std::string& host, int64_t pid, const std::string& started_at) {
  if (host.empty() || pid <= 0 || host != this_host()) return "";  // another machine: cannot look
  const std::string who = "process " + std::to_string(pid) + " on " + host;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return who + " is gone";
  if (is_zombie(pid)) return who + " has ended";
  const int64_t started = parse_utc(started_at), process = process_start(pid);
  if (started >= 0 && process >= 0 && process > started + 2) {
    return who + " is gone (the pid now belongs to a process started later)";
  }
  return "";
}

}  // namespace servesim
