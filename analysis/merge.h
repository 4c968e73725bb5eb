// `sim merge A.db B.db ... --into ALL.db`: the runs of several databases (the shards of a sweep, the
// databases of Ray workers or of separate machines) appended to one. Run ids are renumbered in the
// target; every row that names a run follows it (requests, iterations, metrics, batch_items,
// sweep_points). A sweep found in the target with the same kind and definition (sweeps.spec) is
// the same sweep: its points from every source join one sweeps row, so the shards of one grid
// become one table; a point recorded done in the target is kept over another copy of it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/result.h"

namespace servesim {

// Appends every source into `into` (created if absent) in one transaction per source; a source that
// fails leaves the target as it was before that source. Errors: a source that is not a servesim
// database, the target among the sources. Prints one line per source.
Status merge_databases(const std::vector<std::string>& sources, const std::string& into,
                       std::ostream& out);

}  // namespace servesim
