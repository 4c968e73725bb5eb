#include "runner/run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <cstdio>
#include <ostream>
#include <thread>

#include "analysis/storage/batch_log.h"
#include "analysis/storage/db_recorder.h"
#include "analysis/reports/progress.h"
#include "backends/registry.h"
#include "backends/specs.h"
#include "policies/registry.h"
#include "routers/registry.h"
#include "sim/config/presets.h"
#include "sim/sharded.h"
#include "sim/simulator.h"
#include "workloads/replay.h"
#include "workloads/trace_beside.h"
#include "workloads/vidur_trace.h"

namespace servesim {
namespace {

std::string cache_key(const std::string& path, std::optional<uint64_t> seed, const LoadControls& l) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "|%d:%llu|%.17g|%.17g|%.17g|%lld", seed.has_value() ? 1 : 0,
                static_cast<unsigned long long>(seed.value_or(0)), l.request_rate, l.burstiness,
                l.time_scale, static_cast<long long>(l.num_prompts));
  return path + buf;
}

}  // namespace

LoadControls load_controls(const RunConfig& c) {
  LoadControls l;
  l.request_rate = c.request_rate;
  l.burstiness = c.burstiness;
  l.time_scale = c.time_scale > 0 ? c.time_scale : c.rate_scale > 0 ? 1.0 / c.rate_scale : 0;
  l.num_prompts = c.num_prompts;
  return l;
}

namespace {

// log_resolution "auto" (0) for the workload: by its last arrival that does not follow another
// request (auto_timeline_resolution); 0 beside a trace's reading until it is read whole, 1 for a
// stream that cannot tell.
double auto_resolution(const RequestStream* stream, const Workload* workload, const TraceReadBeside* beside) {
  Time last = stream != nullptr ? stream->last_arrival() : -1;
  if (stream == nullptr) {
    for (const RequestSpec& r : workload->requests) {
      if (r.after.empty()) last = std::max(last, r.arrival);
    }
  }
  if (last >= 0) return auto_timeline_resolution(to_seconds(last));
  return beside != nullptr ? 0 : 1;
}

}  // namespace

Result<std::shared_ptr<const Workload>> WorkloadCache::get(const std::string& path,
                                                           std::optional<uint64_t> seed,
                                                           const LoadControls& load) {
  const std::string key = cache_key(path, seed, load);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  }
  // Loaded outside the lock (two threads may load the same file once each; the first stored wins).
  Result<Workload> w = load_workload(path, seed, load);
  if (!w.ok()) return w.error();
  auto shared = std::make_shared<const Workload>(std::move(w).value());
  std::lock_guard<std::mutex> lock(mutex_);
  return loaded_.emplace(key, std::move(shared)).first->second;
}

std::optional<double> RunOutput::metric(std::string_view name) const { return find_metric(metrics, name); }

namespace {

// The backends' common settings, from the configuration and its resolved files.
BackendSetup backend_setup(const RunConfig& config, const std::string& hardware, const std::string& model) {
  BackendSetup setup;
  setup.hardware = hardware;
  setup.model = model;
  setup.tp = config.tp;
  setup.pp = config.pp;
  setup.dp = config.dp;
  setup.expert_parallel = config.enable_expert_parallel;
  setup.gpu_memory_utilization = config.gpu_memory_utilization;
  setup.dtype = config.dtype;
  setup.kv_dtype = config.kv_dtype;
  setup.block_size = config.block_size;
  setup.max_num_seqs = config.max_num_seqs;
  setup.max_num_batched_tokens = config.max_num_batched_tokens;
  setup.kv_blocks = config.kv_blocks;
  setup.moe_routing_skew = config.moe_routing_skew;
  setup.weights = config.engine_weights;
  setup.engine = config.engine_profile;
  setup.enforce_eager = config.enforce_eager;
  setup.async_scheduling = config.async_scheduling;
  setup.seed = config.seed.value_or(0);
  setup.hardware_sample = config.hardware_sample;
  setup.specs_cache = std::make_shared<SpecsCache>();
  return setup;
}

// One run, stage by stage (run_configuration calls them in order). Each stage's products are
// members, declared in the order the stages make them: destroyed in reverse, a trace's reader is
// joined (join_reader) after the writer and before the stream it reads into and the database its
// callback opens, as when they were one function's locals.
struct RunStages {
  RunStages(const RunConfig& c, const RunEnvironment& e) : config(c), env(e), load(load_controls(c)) {}
  RunStages(const RunStages&) = delete;
  RunStages& operator=(const RunStages&) = delete;

  Status resolve_deployment();
  Status build_replicas();
  Status open_workload();
  Status check_deployment();
  Status make_router();
  Status open_database();
  void describe_run();
  Status begin_recording();
  void read_beside();
  void set_options();
  void open_recorders();
  void note_ignored_settings() const;
  void simulate();
  std::optional<Result<RunOutput>> settle_beside();
  RunOutput finish();
  RunOutput interrupted_before() const;

 private:
  Result<const PolicyInfo*> group_policy(const ReplicaGroup& g, const std::string& key) const;
  Status build_group(size_t gi);
  Status add_link_ends(const ReplicaGroup& g, const std::string& key, int32_t group_tp);
  Status open_stream();
  void start_reading_beside();
  Result<int64_t> begin_run(Database& d);
  void on_trace_read(TraceReadBeside::Outcome outcome);
  std::optional<DbRecorder::Opened> open_run();
  void set_metrics_options();
  void describe_groups();

 public:
  const RunConfig& config;
  const RunEnvironment& env;
  const LoadControls load;

  // resolve_deployment: everything the configuration names.
  std::string trace, hardware, model;
  const PolicyInfo* policy = nullptr;
  const BackendInfo* backend = nullptr;
  // build_replicas
  std::vector<std::unique_ptr<Policy>> policies;
  std::vector<std::unique_ptr<Backend>> backends;
  BackendSetup setup;
  bool mixed = false;
  std::vector<ReplicaGroup> one_group;
  const std::vector<ReplicaGroup>* groups = nullptr;
  bool disaggregated = false;
  std::vector<size_t> group_first;  // the index of each group's first replica
  std::vector<SchedulerLimits> limits;  // per replica
  std::vector<ReplicaRole> roles;
  std::vector<SimOptions::LinkEnd> links;
  bool prefix_caching = false;
  // open_workload
  std::shared_ptr<const Workload> workload;
  std::unique_ptr<RequestStream> stream;
  TraceReadBeside* beside = nullptr;  // the stream, when the trace is read beside the run
  uint64_t workload_seed = 0;
  RunConfig resolved;
  // check_deployment
  const Backend* first = nullptr;
  // make_router
  std::function<std::unique_ptr<Router>()> router;
  // open_database, describe_run, begin_recording
  std::unique_ptr<Database> own_db;
  Database* db = nullptr;
  RunInfo info;
  toml::table policy_options;
  Result<int64_t> run_id = int64_t{-1};
  // read_beside
  std::optional<DbRecorder::Opened> opened;
  std::optional<Error> open_error;
  bool stopped_before = false;  // a signal came before the trace was read
  std::promise<void> settled;
  const std::shared_future<void> beside_settled = settled.get_future().share();
  struct JoinReader {  // after the reading's callback, which uses the members above, is done
    TraceReadBeside* beside = nullptr;
    ~JoinReader() {
      if (beside != nullptr) beside->join();
    }
  } join_reader;
  // set_options, open_recorders
  bool counts_steps = false;
  SimOptions options;
  MetricsOptions mo;
  std::optional<MetricsAccumulator> metrics;
  bool measuring = false;
  LogLevel level = LogLevel::kRequests;
  // The measuring backends share the connection with a BatchLog: their rows are written inline.
  std::optional<DbRecorder> writer;
  std::optional<BatchLog> batch_log;
  std::vector<Recorder*> recorders;
  std::optional<ProgressLine> progress;
  // simulate
  std::chrono::steady_clock::time_point started;
  RunResult result;
};

Status RunStages::resolve_deployment() {
  Result<std::string> t = env.workload != nullptr ? Result<std::string>(env.workload->path)
                                                  : resolve_preset(config.trace, PresetKind::kWorkload, "--trace");
  if (!t.ok()) return t.error();
  trace = t.value();
  hardware = config.hardware;
  model = config.model;
  if (!hardware.empty()) {
    Result<std::string> p = resolve_preset(hardware, PresetKind::kHardware, "--hardware");
    if (!p.ok()) return p.error();
    hardware = p.value();
  }
  if (!model.empty()) {
    Result<std::string> p = resolve_preset(model, PresetKind::kModel, "--model");
    if (!p.ok()) return p.error();
    model = p.value();
  }
  Result<const PolicyInfo*> policy_info = find_policy(config.policy);
  if (!policy_info.ok()) return Error{"--policy: " + policy_info.error().message};
  policy = policy_info.value();
  Result<const BackendInfo*> backend_info = find_backend(config.backend);
  if (!backend_info.ok()) return Error{"--backend: " + backend_info.error().message};
  backend = backend_info.value();
  setup = backend_setup(config, hardware, model);
  // The replicas' groups: the configuration's [[replicas]] (mixed hardware), or one group.
  // (Referred to, not copied: a copied TOML table loses its values' file positions, which the
  // groups' [replicas.policy] errors name.)
  mixed = !config.replica_groups.empty();
  if (mixed && backend->measures) {
    return Error{"replicas: [[replicas]] groups of their own hardware are priced by a cost model; the " +
                 config.backend + " backend measures this one machine (use --backend roofline)"};
  }
  if (!mixed) {
    ReplicaGroup all;
    all.count = config.ranks();
    all.hardware = config.hardware;
    all.tp = config.tp;
    one_group.push_back(std::move(all));
  }
  groups = mixed ? &config.replica_groups : &one_group;
  disaggregated = config.disaggregated();
  if ((config.dp > 1 || config.enable_expert_parallel) &&
      (mixed || disaggregated || config.pp > 1 || backend->measures || config.backend == "unit")) {
    return Error{std::string(config.dp > 1 ? "dp" : "enable_expert_parallel") +
                 ": data and expert parallelism are priced by the roofline backend for one group of replicas, "
                 "without pipeline stages, [[replicas]] groups or disaggregation"};
  }
  prefix_caching = policy->prefix_caching;
  setup.prefix_caching = prefix_caching;
  return Ok{};
}

Status RunStages::build_replicas() {
  for (size_t gi = 0; gi < groups->size(); ++gi) {
    if (Status s = build_group(gi); !s.ok()) return s;
  }
  return Ok{};
}

// The group's policy: its own [replicas.policy], or the run's.
Result<const PolicyInfo*> RunStages::group_policy(const ReplicaGroup& g, const std::string& key) const {
  if (!g.has_policy) return policy;
  const PolicyInfo* chosen = policy;
  if (!g.policy.empty()) {
    Result<const PolicyInfo*> found = find_policy(g.policy);
    if (!found.ok()) return Error{key + ".policy.name: " + found.error().message};
    chosen = found.value();
  }
  if (chosen->prefix_caching != prefix_caching) {
    return Error{key + ".policy.name: every replica keeps a prefix cache or none does; the run's policy " +
                 config.policy + (prefix_caching ? " keeps one" : " does not") + ", " + std::string(chosen->name) +
                 (chosen->prefix_caching ? " does" : " does not")};
  }
  return chosen;
}

Status RunStages::build_group(size_t gi) {
  const ReplicaGroup& g = (*groups)[gi];
  const std::string key = "replicas[" + std::to_string(gi) + "]";
  BackendSetup group_setup = setup;
  if (!g.hardware.empty()) {
    Result<std::string> p = resolve_preset(g.hardware, PresetKind::kHardware, "replicas.hardware");
    if (!p.ok()) return p.error();
    group_setup.hardware = p.value();
  }
  if (g.tp > 0) group_setup.tp = g.tp;
  const SchedulerLimits group_limits{g.max_num_seqs > 0 ? g.max_num_seqs : config.max_num_seqs,
                                     g.max_num_batched_tokens > 0 ? g.max_num_batched_tokens
                                                                  : config.max_num_batched_tokens};
  if (group_limits.max_num_batched_tokens < group_limits.max_num_seqs) {
    return Error{key + ": max_num_batched_tokens (" + std::to_string(group_limits.max_num_batched_tokens) +
                 ") must be at least max_num_seqs (" + std::to_string(group_limits.max_num_seqs) + ")"};
  }
  group_setup.max_num_seqs = group_limits.max_num_seqs;
  group_setup.max_num_batched_tokens = group_limits.max_num_batched_tokens;
  Result<const PolicyInfo*> made_by = group_policy(g, key);
  if (!made_by.ok()) return made_by.error();
  const toml::table& group_options = g.has_policy ? g.policy_options : config.policy_options;
  group_first.push_back(backends.size());
  for (int32_t i = 0; i < g.count; ++i) {
    Result<std::unique_ptr<Policy>> p = made_by.value()->make(group_options);
    if (!p.ok()) return p.error();  // the [replicas.policy] value's file and line, or the run's
    if (disaggregated && p.value()->holds_finished_requests()) {
      return Error{(g.has_policy ? key + ".policy.name: " : std::string("--policy ")) + std::string(p.value()->name()) +
                   ": disaggregated serving hands each request to a decode replica after its first token, "
                   "which a static batch does not let go; use continuous, chunked-prefill or prefix-cached"};
    }
    if (config.pp > 1 && (disaggregated || p.value()->holds_finished_requests())) {
      return Error{"pp: pipeline parallelism runs vLLM's batch queue under continuous, chunked-prefill or "
                   "prefix-cached, without disaggregation; got " + std::string(disaggregated ? "disaggregated replicas" : "--policy " + std::string(p.value()->name()))};
    }
    policies.push_back(std::move(p.value()));
    Result<std::unique_ptr<Backend>> b = backend->make(group_setup);
    if (!b.ok()) return b.error();
    if (b.value()->pipeline_stages() != config.pp) {
      return Error{"pp: the " + config.backend + " backend prices one GPU group, not " + std::to_string(config.pp) +
                   " pipeline stages; use --backend roofline"};
    }
    backends.push_back(std::move(b.value()));
    limits.push_back(group_limits);
  }
  if (disaggregated) return add_link_ends(g, key, group_setup.tp);
  return Ok{};
}

// The link's two ends: each GPU of a replica moves its share of the KV over its own NIC.
Status RunStages::add_link_ends(const ReplicaGroup& g, const std::string& key, int32_t group_tp) {
  const Backend& b = *backends.back();
  const int32_t tp = b.counts_steps() ? 1 : group_tp;
  const std::string hw = b.hardware_path().empty() ? std::string("the ") + config.backend + " backend"
                                                    : "hardware " + preset_display_name(b.hardware_path(), PresetKind::kHardware);
  const double gbs = config.link_gbs > 0 ? config.link_gbs * 1e9 : b.network_bandwidth();
  const double latency = config.link_latency_us >= 0 ? config.link_latency_us * 1e-6 : b.network_latency();
  const bool file = !b.hardware_path().empty();
  if (gbs <= 0) {
    return Error{"disaggregation.link_gbs: " + hw + " (" + key + ") gives no network_gbs, the bandwidth per GPU " +
                 "of the link its KV transfers take; " + (file ? "add network_gbs to the hardware file, or " : "") +
                 "give --set disaggregation.link_gbs=GBS"};
  }
  if (latency < 0) {
    return Error{"disaggregation.link_latency_us: " + hw + " (" + key + ") gives no network_latency_us, the " +
                 "fixed cost of one KV transfer; " + (file ? "add network_latency_us to the hardware file, or " : "") +
                 "give --set disaggregation.link_latency_us=US"};
  }
  const ReplicaRole role = g.role == "prefill" ? ReplicaRole::kPrefill : ReplicaRole::kDecode;
  roles.insert(roles.end(), static_cast<size_t>(g.count), role);
  links.insert(links.end(), static_cast<size_t>(g.count), SimOptions::LinkEnd{gbs * tp, seconds_to_time(latency)});
  return Ok{};
}

// The workload: shared by a sweep's points; streamed, for a single run, when it is generated
// independent requests (a run of millions then holds only those in flight); else loaded.
Status RunStages::open_workload() {
  if (env.workload != nullptr) {
    workload = std::shared_ptr<const Workload>(env.workload, [](const Workload*) {});  // not owned
  } else if (env.workloads != nullptr) {
    auto w = env.workloads->get(trace, config.seed, load);
    if (!w.ok()) return w.error();
    workload = std::move(w).value();
  } else if (Status s = open_stream(); !s.ok()) {
    return s;
  }
  if (workload != nullptr) {
    workload_seed = workload->seed;
    // Independent requests are streamed from memory too: only those in flight are simulated.
    if (std::all_of(workload->requests.begin(), workload->requests.end(),
                    [](const RequestSpec& r) { return r.after.empty(); })) {
      stream = std::make_unique<RequestListStream>(workload->requests);
    }
  }
  if (stream != nullptr ? stream->size() == 0 : workload->requests.empty()) {
    return Error{trace + ": the workload has no requests"};
  }
  // The timeline's resolution: the user's, or by the arrivals' span (auto_timeline_resolution).
  // A trace read beside the run tells its span once read: until then the simulation buckets by the
  // second, and the writer merges those buckets into the resolution found then.
  resolved = config;
  if (resolved.log_resolution <= 0) resolved.log_resolution = auto_resolution(stream.get(), workload.get(), beside);
  return Ok{};
}

// The workload of this run only: generated as a stream, read beside the run, or loaded.
Status RunStages::open_stream() {
  auto s = open_request_stream(trace, config.seed, load, &workload_seed);
  if (!s.ok()) return s.error();
  stream = std::move(s).value();
  if (stream == nullptr && env.read_trace_beside && is_trace_path(trace) && !load.any() &&
      env.recorders.empty() && !disaggregated && !backend->measures) {
    start_reading_beside();
  }
  if (stream == nullptr) {
    Result<Workload> w = load_workload(trace, config.seed, load);
    if (!w.ok()) return w.error();
    workload = std::make_shared<const Workload>(std::move(w).value());
  }
  return Ok{};
}

// A csv, vidur or azure trace: read beside the run (Mooncake's rows are JSON).
void RunStages::start_reading_beside() {
  const Result<TraceFormat> format = detect_trace_format(trace);
  if (!format.ok() || format.value() == TraceFormat::kMooncake) return;
  ReplayOptions o;
  o.path = trace;
  o.format = format.value();
  if (format.value() == TraceFormat::kVidur) o.columns = vidur_columns();
  if (auto started_reading = TraceReadBeside::start(o); started_reading.ok()) {
    beside = started_reading.value().get();
    stream = std::move(started_reading).value();
  }
}

Status RunStages::check_deployment() {
  if (config.kv_groups && config.kv_groups->any() && prefix_caching)
    return Error{"kv.full_groups / kv.windowed_groups / kv.state_groups: a hybrid KV layout with prefix caching is not "
                 "modelled (vLLM's hybrid manager caches each group apart); run a policy without a prefix cache"};
  // --max-model-len caps the context; vLLM refuses one longer than the model's positions.
  for (const auto& b : backends) {
    if (config.max_model_len > 0 && b->max_model_len() > 0 && config.max_model_len > b->max_model_len())
      return Error{"max_model_len " + std::to_string(config.max_model_len) + " exceeds the model's " +
                   std::to_string(b->max_model_len()) + " positions (max_position_embeddings); vLLM refuses it too"};
  }
  if (disaggregated && workload != nullptr) {
    // Every prompt's KV must fit every decode replica (a streamed workload's requests that do not
    // are rejected as they come, as too large for the cache).
    const auto longest = std::max_element(workload->requests.begin(), workload->requests.end(),
                                          [](const RequestSpec& a, const RequestSpec& b) { return a.prompt_tokens < b.prompt_tokens; });
    for (size_t g = 0; g < groups->size(); ++g) {
      const Backend& b = *backends[group_first[g]];
      const int64_t blocks = config.kv_blocks >= 0 ? config.kv_blocks : b.kv_blocks(config.block_size);
      if ((*groups)[g].role != "decode" || blocks < 0 || blocks * config.block_size >= longest->prompt_tokens) continue;
      return Error{"replicas[" + std::to_string(g) + "]: a decode replica's KV cache holds " +
                   std::to_string(blocks * config.block_size) + " tokens, and request '" + longest->id +
                   "' has a prompt of " + std::to_string(longest->prompt_tokens) +
                   " tokens, whose KV could never move there; give the decode replicas more memory "
                   "(hardware, tp, gpu_memory_utilization or kv.blocks)"};
    }
  }
  first = backends.front().get();
  // The files the backend actually uses (its defaults included), for the record.
  if (!first->hardware_path().empty()) hardware = first->hardware_path();
  if (!first->model_path().empty()) model = first->model_path();
  if (config.price_by_node && config.gpus_per_node == 0) {
    for (const std::unique_ptr<Backend>& b : backends) {
      if (b->gpus_per_node() > 0 || b->counts_steps()) continue;
      const std::string what = b->hardware_path().empty() ? "the " + config.backend + " backend"
                                                          : "hardware " + b->hardware_path();
      return Error{"price_by = \"node\": " + what + " gives no gpus_per_node: add it to the file, or "
                   "--set gpus_per_node=N (and node_price_per_hour_usd)"};
    }
  }
  return Ok{};
}

// The router, checked before anything is recorded: an unknown name or option is bad input.
Status RunStages::make_router() {
  Result<const RouterInfo*> router_info = find_router(config.router);
  if (!router_info.ok()) return Error{"--router: " + router_info.error().message};
  const RouterInfo* found = router_info.value();
  if (found->needs_prefix_caching && !policy->prefix_caching) {
    return Error{"--router " + config.router + " routes by the replicas' prefix caches, which --policy " +
                 config.policy + " does not keep: use --policy prefix-cached"};
  }
  const uint64_t router_seed = workload_seed;
  Result<std::unique_ptr<Router>> check = found->make(config.router_options, router_seed);
  if (!check.ok()) return check.error();
  router = [found, router_options = config.router_options, router_seed] {
    return found->make(router_options, router_seed).value();
  };
  return Ok{};
}

Status RunStages::open_database() {
  db = env.db;
  if (db == nullptr && beside == nullptr) {  // beside a trace's reading: once it is read (read_beside)
    Result<std::unique_ptr<Database>> made = Database::open(config.db, config.db_sync);
    if (!made.ok()) return made.error();
    own_db = std::move(made).value();
    db = own_db.get();
  }
  return Ok{};
}

// The run's row.
void RunStages::describe_run() {
  info.name = config.name;
  info.policy = config.policy;
  info.backend = config.backend;
  info.hardware = hardware;
  info.model = model;
  info.workload = trace;
  policy_options = policies.front()->options();
  info.config_toml = config_to_toml(resolved, policy_options);
  info.seed = workload_seed;
  info.version = SERVESIM_VERSION;
  info.host = this_host();
  info.pid = static_cast<int64_t>(::getpid());
  info.replicas = config.ranks();
  info.tp = config.tp;
  if (config.pp > 1 || config.dp > 1) info.gpus = static_cast<int64_t>(config.replicas) * config.gpus_per_replica();
  if (mixed) describe_groups();
  info.sweep_id = env.sweep_id;
}

// "2 x h100-sxm (tp 2) + 4 x l4": the deployment; tp is the first group's, gpus their sum.
void RunStages::describe_groups() {
  info.hardware.clear();
  info.gpus = 0;
  for (size_t g = 0; g < groups->size(); ++g) {
    const ReplicaGroup& group = (*groups)[g];
    const Backend& b = *backends[group_first[g]];
    const int32_t tp = group.tp > 0 ? group.tp : config.tp;
    // "2 x h100-sxm (tp 2, prefill)"; the unit backend has no hardware: "1 prefill".
    const std::string name = preset_display_name(b.hardware_path(), PresetKind::kHardware);
    std::string notes = tp > 1 ? "tp " + std::to_string(tp) : "";
    if (config.pp > 1) notes += (notes.empty() ? "" : ", ") + std::string("pp ") + std::to_string(config.pp);
    if (!group.role.empty() && !name.empty()) notes += (notes.empty() ? "" : ", ") + group.role;
    info.hardware += (g ? " + " : "") + std::to_string(group.count) +
                     (name.empty() ? (group.role.empty() ? "" : " " + group.role) : " x " + name) +
                     (notes.empty() ? "" : " (" + notes + ")");
    info.gpus += static_cast<int64_t>(group.count) * config.gpus_per_replica(tp);
  }
  info.tp = groups->front().tp > 0 ? groups->front().tp : config.tp;
}

// A signal while loading: nothing is recorded.
RunOutput RunStages::interrupted_before() const {
  RunOutput out;
  out.status = "interrupted";
  out.error = "interrupted before the run started; nothing was written to " + (db != nullptr ? db->path() : config.db);
  return out;
}

// The run's row, on a connection that writes as the run asks (config.db_sync).
Result<int64_t> RunStages::begin_run(Database& d) {
  if (Status s = d.set_synchronous(config.db_sync); !s.ok()) return s.error();
  return d.begin_run(info);
}

Status RunStages::begin_recording() {
  if (beside == nullptr) {
    run_id = begin_run(*db);
    if (!run_id.ok()) return storage_error(run_id.error());
  }
  return Ok{};
}

// Beside a trace's reading, the run's row (and the database, unless given) once the trace is read
// whole and good, on the reader's thread: the run goes on meanwhile, and its rows wait for it
// (DbRecorder's opener); a bad or unsorted trace leaves nothing behind. A database that cannot
// be opened then stops the run (its stream is cut).
void RunStages::read_beside() {
  join_reader.beside = beside;
  if (beside != nullptr) beside->when_read([this](TraceReadBeside::Outcome outcome) { on_trace_read(outcome); });
}

void RunStages::on_trace_read(TraceReadBeside::Outcome outcome) {
  if (outcome == TraceReadBeside::Outcome::kStopped || (env.stop != nullptr && env.stop->load())) {
    stopped_before = true;
  } else if (outcome == TraceReadBeside::Outcome::kRead) {
    if (db == nullptr) {
      Result<std::unique_ptr<Database>> made = Database::open(config.db, config.db_sync);
      if (made.ok()) {
        own_db = std::move(made).value();
        db = own_db.get();
      } else {
        open_error = made.error();
      }
    }
    if (db != nullptr) {
      double resolution = resolved.log_resolution;
      if (resolution <= 0) {  // auto: now that the trace's span is known
        RunConfig known = resolved;
        known.log_resolution = resolution = auto_resolution(beside, nullptr, beside);
        info.config_toml = config_to_toml(known, policy_options);
      }
      run_id = begin_run(*db);
      if (run_id.ok()) {
        opened = DbRecorder::Opened{db, run_id.value(), resolution};
      } else {
        open_error = storage_error(run_id.error());
      }
    }
    if (open_error) beside->cut(open_error->message);
  }
  settled.set_value();
}

std::optional<DbRecorder::Opened> RunStages::open_run() {
  if (env.stop != nullptr && env.stop->load()) beside->stop();  // a signal: no need to read on
  beside_settled.wait();
  return opened;
}

void RunStages::set_options() {
  counts_steps = first->counts_steps();
  options.replicas = config.ranks();
  options.limits = {config.max_num_seqs, config.max_num_batched_tokens};
  options.block_size = config.block_size;
  options.kv_blocks = config.kv_blocks;
  options.default_max_tokens = config.max_tokens;
  options.max_model_len = config.max_model_len > 0 ? config.max_model_len : first->max_model_len();
  options.prefix_caching = prefix_caching;
  if (config.kv_groups) {
    options.kv_groups = *config.kv_groups;
    options.kv_groups_set = true;
  }
  options.replica_limits = std::move(limits);
  options.roles = std::move(roles);
  options.links = std::move(links);
  options.max_concurrency = config.max_concurrency;
  options.leap = config.leap;
  if (config.dp > 1 && first->steps_with_ranks()) options.lockstep = config.dp;
  options.session_affinity = config.session_affinity;
  options.router = std::move(router);
  set_metrics_options();
  metrics.emplace(mo);
  // The measuring backends log every iteration (`sim validate` and `sim calibrate` read them); so
  // does the unit backend unless told otherwise, whose step-by-step schedule is what it shows.
  measuring = backend->measures;
  level = measuring                ? LogLevel::kIterations
          : !config.log.empty()    ? parse_log_level(config.log)
          : first->counts_steps()  ? LogLevel::kIterations
                                   : LogLevel::kRequests;
  // Auto: a thread per core, but for the writer's when rows are written (its thread is busy too:
  // on two cores, two groups and the writer take longer than one group beside the writer).
  const int32_t cores = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  options.threads = config.threads > 0 ? config.threads
                    : env.threads > 0  ? env.threads
                    : level >= LogLevel::kRequests ? std::max(1, cores - 1)
                                                   : cores;
}

// The node's GPUs and price per hour of backend `b`.
void node_of(const RunConfig& config, const Backend& b, int32_t& gpus, double& price, double gpu_price) {
  const NodePrice n = node_price(config, b.gpus_per_node(), b.node_price_per_hour(), gpu_price);
  gpus = n.gpus;
  price = n.per_hour;
}

void RunStages::set_metrics_options() {
  mo.max_num_seqs = config.max_num_seqs;
  mo.replicas = config.ranks();
  mo.tp = counts_steps ? 1 : config.tp * config.pp;  // GPUs per replica (a data-parallel rank is one)
  mo.slo_ttft = config.slo_ttft;
  mo.slo_tpot = config.slo_tpot;
  mo.slo_e2el = config.slo_e2el;
  mo.percentiles = config.metric_percentiles;
  mo.price_per_gpu_hour = config.price_per_hour_usd >= 0 ? config.price_per_hour_usd : first->gpu_price_per_hour();
  node_of(config, *first, mo.gpus_per_node, mo.node_price_per_hour, mo.price_per_gpu_hour);
  mo.price_by_node = config.price_by_node;
  mo.kv_blocks = config.kv_blocks >= 0 ? config.kv_blocks : first->kv_blocks(config.block_size);
  mo.block_size = config.block_size;
  mo.kv_bytes_per_token = first->kv_bytes_per_block() / config.block_size;
  const KvGroups kv_groups = config.kv_groups ? *config.kv_groups : first->kv_groups();
  mo.kv_blocks_per_token_block = 1.0 + kv_groups.extra_full + kv_groups.windowed;
  mo.prefix_caching = prefix_caching;
  for (size_t g = 0; mixed && g < groups->size(); ++g) {
    const Backend& b = *backends[group_first[g]];
    ReplicaGroupShape shape;
    shape.count = (*groups)[g].count;
    shape.tp = counts_steps ? 1 : config.gpus_per_replica((*groups)[g].tp);  // GPUs per replica
    shape.price_per_gpu_hour = config.price_per_hour_usd >= 0 ? config.price_per_hour_usd : b.gpu_price_per_hour();
    node_of(config, b, shape.gpus_per_node, shape.node_price_per_hour, shape.price_per_gpu_hour);
    shape.hardware = b.hardware_path();
    shape.kv_blocks = config.kv_blocks >= 0 ? config.kv_blocks : b.kv_blocks(config.block_size);
    shape.kv_bytes_per_token = b.kv_bytes_per_block() / config.block_size;
    mo.groups.push_back(shape);
  }
  for (const ReplicaRole role : options.roles) mo.pools.push_back(role == ReplicaRole::kPrefill ? 1 : 2);
  mo.expected_requests = beside != nullptr   ? beside->expected_rows()
                         : stream != nullptr ? stream->size()
                                             : static_cast<int64_t>(workload->requests.size());
}

// The run's observers: its metrics, its rows' writer (and batch log), the caller's, its progress.
void RunStages::open_recorders() {
  if (beside != nullptr) {
    // Auto (0): by the second until the trace is read, then merged into Opened::resolution.
    writer.emplace([this] { return open_run(); }, *metrics, level,
                   resolved.log_resolution > 0 ? resolved.log_resolution : 1.0);
  } else {
    writer.emplace(*db, run_id.value(), *metrics, level, resolved.log_resolution, !measuring);
  }
  // A measuring backend also logs every batch's items, for `sim validate --hardware` and
  // `sim calibrate`; made after the writer so that its rows land in the writer's transaction.
  if (measuring) batch_log.emplace(*db, run_id.value());
  recorders = {&*metrics};
  if (batch_log) recorders.push_back(&*batch_log);
  recorders.push_back(&*writer);
  recorders.insert(recorders.end(), env.recorders.begin(), env.recorders.end());
  if (env.progress != nullptr) {
    if (beside != nullptr) {  // the total once the trace is read
      progress.emplace(*env.progress, 0, counts_steps, [b = beside] { return b->read_rows(); });
    } else {
      progress.emplace(*env.progress, mo.expected_requests, counts_steps);
    }
    recorders.push_back(&*progress);
  }
}

void RunStages::note_ignored_settings() const {
  if (counts_steps && env.notes != nullptr &&
      (!hardware.empty() || !model.empty() || config.tp != 1 ||
       config.gpu_memory_utilization != RunConfig{}.gpu_memory_utilization)) {
    *env.notes << "sim: note: the " << config.backend
               << " backend ignores --hardware, --model, --tp and --gpu-memory-utilization "
                  "(they are recorded with the run)\n";
  }
}

void RunStages::simulate() {
  started = std::chrono::steady_clock::now();
  if (stream != nullptr && ShardedSimulation::possible(options, policies, recorders)) {
    ShardedSimulation sim(*stream, options, std::move(policies), std::move(backends), std::move(recorders));
    result = sim.run(env.stop);
    return;
  }
  std::unique_ptr<Simulator> sim =
      stream != nullptr ? std::make_unique<Simulator>(*stream, options, std::move(policies),
                                                      std::move(backends), std::move(recorders))
                        : std::make_unique<Simulator>(workload->requests, options, std::move(policies),
                                                      std::move(backends), std::move(recorders));
  result = sim->run(env.stop);  // returns at once if a signal came already
}

// The trace's outcome decides what the run was: nothing is recorded unless it was read good. The
// run's answer when it is not (or it was read unsorted, and the run is done again); nullopt: go on.
std::optional<Result<RunOutput>> RunStages::settle_beside() {
  if (beside == nullptr) return std::nullopt;
  beside_settled.wait();
  if (stopped_before) return interrupted_before();
  switch (beside->wait()) {
    case TraceReadBeside::Outcome::kRead: break;
    case TraceReadBeside::Outcome::kStopped: return interrupted_before();
    case TraceReadBeside::Outcome::kFailed: return Error{beside->failure()};
    case TraceReadBeside::Outcome::kReadAgain: {  // unsorted: the run again, from the sorted trace
      join_reader.beside = nullptr;
      stream.reset();  // its rows, no longer needed
      RunEnvironment again = env;
      again.read_trace_beside = false;
      return run_configuration(config, again);
    }
  }
  if (open_error) return *open_error;
  return std::nullopt;
}

RunOutput RunStages::finish() {
  RunOutput out;
  out.run_id = run_id.value();
  out.db_path = db->path();
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  switch (result.outcome) {
    case RunOutcome::kDone: out.status = "done"; break;
    case RunOutcome::kInterrupted: out.status = "interrupted"; break;
    case RunOutcome::kFailed: out.status = "failed"; break;
  }
  out.error = result.error;
  out.bad_input = result.bad_input;
  out.metrics = writer->final_metrics();
  if (batch_log && !batch_log->write_error().empty()) {
    out.write_error = "writing batch_items failed: " + batch_log->write_error();
  }
  if (!writer->write_error().empty()) out.write_error = writer->write_error();
  SummaryHeader& header = out.header;
  header.run_id = run_id.value();
  header.db_path = db->path();
  header.name = config.name;
  header.policy = config.policy;
  header.backend = counts_steps ? "unit" : config.backend;
  header.hardware = mixed ? info.hardware : hardware;
  header.model = model;
  header.workload = trace;
  header.mirrors = policy_release(info.config_toml);
  header.status = out.status;
  header.replicas = config.ranks();
  header.tp = info.tp;
  header.percentiles = config.metric_percentiles;
  return out;
}

}  // namespace

// A whole run: every input checked before anything is written (stages 1-5), then the run's row
// (6), the simulation (7), and its outcome (8).
Result<RunOutput> run_configuration(const RunConfig& config, const RunEnvironment& env) {
  if (config.trace.empty() && env.workload == nullptr) {
    return Error{"no workload: give --trace FILE (e.g. --trace pareto.toml). Try 'sim --help'."};
  }
  RunStages run(config, env);
  // 1-5. Everything the configuration names: the files, the replicas, the workload, the router.
  for (Status (RunStages::*stage)() : {&RunStages::resolve_deployment, &RunStages::build_replicas,
                                       &RunStages::open_workload, &RunStages::check_deployment,
                                       &RunStages::make_router, &RunStages::open_database}) {
    if (Status s = (run.*stage)(); !s.ok()) return s.error();
  }
  // 6. The run's row: from here on the run is recorded, whatever happens.
  run.describe_run();
  if (env.stop != nullptr && env.stop->load()) return run.interrupted_before();
  if (Status s = run.begin_recording(); !s.ok()) return s.error();
  run.read_beside();
  // 7. The simulation, watched by the run's recorders.
  run.set_options();
  run.open_recorders();
  run.note_ignored_settings();
  run.simulate();
  // 8. Its outcome.
  if (std::optional<Result<RunOutput>> settled = run.settle_beside()) return std::move(*settled);
  return run.finish();
}

}  // namespace servesim
