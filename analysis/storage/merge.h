// `sim merge A.db B.db ... --into ALL.db`: the runs of several databases (the shards of a sweep, the
// databases of Ray workers or of separate machines) appended to one. Run ids are renumbered in the
// target; every row that names a run follows it (requests, iterations, timeline, metrics,
// distributions, transfers, batch_items, sweep_points).
//
// The merge is idempotent: a run already in the target (the same uid, runs.uid; for runs written
// before runs had one, the same start time, host, process, name and configuration: a merge run
// again, or a database merged twice by two routes) is not copied again, so a merge that stopped
// part-way is finished by running it again. Each source goes in
// one transaction: a source whose merge fails or is interrupted leaves nothing of itself behind.
//
// A sweep of a source joins a sweep of the target with the same kind, definition (sweeps.spec) and
// keys when their points do not clash (the shards of one grid, or the same sweep merged again);
// the same definition run twice over the same points stays two sweeps. A point recorded done in
// the target is kept over another copy of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "sim/result.h"

namespace servesim {

struct MergeOutcome {
  std::vector<std::string> merged;  // the sources merged, in order
  // For each source merged (as `merged`), its runs' ids in the target, in the source's id order
  // (a run the target had already: that copy's id).
  std::vector<std::vector<int64_t>> run_ids;
  bool interrupted = false;         // `stop` was raised: the source being merged was rolled back
};

// Appends every source into `into` (created if absent), source by source. Errors (before anything
// is written): no source, a source given twice or that is the target, a source that is not a
// servesim database. An error while merging a source (a full disk: a storage error) leaves the
// sources before it merged and nothing of it; the message says which. Prints one line per source.
Result<MergeOutcome> merge_databases(const std::vector<std::string>& sources, const std::string& into,
                                     std::ostream& out, const std::atomic<bool>* stop = nullptr);

}  // namespace servesim
