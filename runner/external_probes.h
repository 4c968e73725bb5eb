// Probes run by a parent process: `sim search --probes-external`, which scripts/ray_search.py
// starts and whose probes it runs as Ray tasks on a cluster. The search itself (which probes, in
// which rounds, and what their outcomes answer) stays in runner/search.h; the parent only runs
// configurations. One round is one exchange of lines:
//
//   sim -> parent (stdout)  @@servesim-probes {"round": 0, "probes": [{"point": 3, "config": "..."}]}
//   parent -> sim (stdin)   {"results": [{"point": 3, "db": "/tmp/r/probe3.db"}, {"point": 4, "error": "..."},
//                                        {"point": 5, "error": "...", "lost": true}]}
//
// `config` is the probe's whole run configuration as TOML, without `db` (what `sim run --config
// FILE --db OWN.db` runs). Each probe of the round has one result: the database its run wrote (one
// run), or the error that kept it from writing one: the message of a `sim run` that failed before
// its run began (the probe fails with it, as a local probe that fails, and the search goes on), or,
// with "lost": true, of a task the parent lost after its retries (the probe is interrupted: a miss
// that says nothing of its configuration). `{"error": "..."}` in place of the results: the parent
// cannot run the round, and the search stops unanswered. Lines of stdout without the prefix (the
// final table) are the parent's to pass on.
//
// The executor merges each returned database into the search's (analysis/storage/merge.h), links its run
// to the search (runs.sweep_id and a sweep_points row, analysis/storage/sweep_db.h) and reads the probe's
// status, error and metrics back from the merged rows, so the search judges them as it judges a
// local probe's. The returned databases are the parent's: the executor only reads them.
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>

#include "runner/search.h"
#include "sim/result.h"

namespace servesim {

inline constexpr std::string_view kProbesLinePrefix = "@@servesim-probes ";

// The two ends of the protocol. Tests plug in their own.
struct ProbeChannel {
  std::function<Status(const std::string& line)> send;  // writes `line` and a newline, flushed
  std::function<Result<std::string>()> receive;         // the next line, without its newline; an
                                                        // Error when none comes (closed, stopped)
};

// Lines out to `out`; lines in from the file descriptor `in_fd`, read as they come so that a
// raised `stop` ends the wait (Error "interrupted").
ProbeChannel stream_channel(std::ostream& out, int in_fd, const std::atomic<bool>* stop);

// The request line of a round (with the prefix).
std::string probe_request_line(const ProbeRound& round);

// The executor of runner/search.h that runs every round through `channel`.
ProbeExecutor external_probe_executor(ProbeChannel channel);

}  // namespace servesim
