// Explicit workloads: the [[request]] entries of a workload file, with the [[prefix]] entries they may
// name. Part of the workload loader (workload.h), split out of workload.cc.
//
//   [[prefix]]                 shared prompt prefixes (prefixes.h)
//   id = "system"              required, unique among prefixes
//   tokens = 1024              required, >= 1
//
//   [[request]]
//   id = "A"                   optional, default r0, r1, ... (by position in the file)
//   arrival = 0.0              seconds >= 0, default 0; not allowed with after
//   prompt_tokens = 16         >= 1, default 1; with prefix, the part AFTER the prefix
//   output_tokens = 3          required, >= 1
//   max_tokens = 256           optional, >= 1
//   prefix = "system"          optional: the id of a [[prefix]]; prepended to the prompt, so the
//                              request's prompt_tokens becomes the prefix's tokens + prompt_tokens
//   after = ["B", "C"]         optional, non-empty: ids of requests that must finish first; the
//                              request then arrives when the last of them finishes, plus think_time
//   think_time = 2.0           seconds >= 0, default 0; only with after
//
// Request i with a prefix gets prompt [{content_id(kPrefixContent, j), tokens of prefix j},
// {content_id(kUserContent, i), its prompt_tokens}], j being the prefix's position among the [[prefix]]
// entries; a request without one keeps an empty prompt (its own, shared with nobody).
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

#include "sim/request.h"
#include "sim/result.h"

namespace servesim {

// Reads root["request"] (required) and root["prefix"] (optional) of a parsed workload file. Returns
// the requests in the order of dag.h (independent requests by arrival, ties in file order; each
// dependent one after its parents), `after` holding indices into that vector. Errors name the file,
// line and key: bad values, unknown keys, duplicate ids, an unknown prefix (listing the known ones),
// after together with arrival, think_time without after, an id in after that no request has, and a
// dependency cycle (`request[i]: dependency cycle: A -> B -> A`, each waiting for the next).
Result<std::vector<RequestSpec>> read_explicit_requests(const toml::table& root,
                                                        const std::string& path);

}  // namespace servesim
