// Whether a run recorded as `running` is still running. A run whose process was killed (SIGKILL, an
// out-of-memory kill, a power loss) cannot mark itself, so its row says `running` forever; readers
// ask here instead. The row names the host and process (runs.host, runs.pid) and when it started.
#pragma once

#include <cstdint>
#include <string>

namespace servesim {

// For a run recorded as running: "" if its process may still be running it (it is alive on this
// host, or the run was written on another host, where this one cannot look), or why it was
// abandoned ("process 4242 on node7 is gone"). A pid reused by a newer process counts as gone.
// `started_at` is the run's start, ISO 8601 UTC as runs.started_at stores it.
std::string abandoned_reason(const std::string& host, int64_t pid, const std::string& started_at);

}  // namespace servesim
