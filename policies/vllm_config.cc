#include "policies/vllm_config.h"

#include <string>

#include "sim/config/options.h"

namespace servesim {

const std::vector<VllmRelease>& vllm_releases() {
  static const std::vector<VllmRelease> kReleases = {
      {"0.33.0", true, true, true, true, FreeOrder::kHashlessFirst},
      {"0.11.0", false, false, false, false, FreeOrder::kFifo},
  };
  return kReleases;
}

namespace {

const VllmRelease* find_release(std::string_view version) {
  for (const VllmRelease& r : vllm_releases()) {
    if (r.version == version) return &r;
  }
  return nullptr;
}

std::string release_list() {
  std::string list;
  for (const VllmRelease& r : vllm_releases()) {
    list += (list.empty() ? "" : " | ") + ("\"" + std::string(r.version) + "\"");
  }
  return list;
}

// A switch that `release` does not have: refused with what that release does instead.
void refuse_missing(OptionReader& r, std::string_view key, const VllmRelease& release,
                    std::string_view instead) {
  r.refuse(key, "vLLM " + std::string(release.version) + " has no such switch (" +
                    std::string(instead) + "); remove it, or set vllm_version = \"" +
                    std::string(vllm_releases().front().version) + "\"");
}

}  // namespace

Result<VllmSchedulerConfig> read_vllm_scheduler_config(const toml::table& options,
                                                       bool prefix_cached) {
  OptionReader r(options, "policy");
  VllmSchedulerConfig c;
  const std::string default_version(vllm_releases().front().version);
  if (const toml::node* v = options.get("vllm_version"); v != nullptr) {
    const auto* s = v->as_string();
    c.release = s != nullptr ? find_release(s->get()) : nullptr;
    if (c.release == nullptr) {
      r.fail(*v, "vllm_version", "one of " + release_list() + " (the vLLM releases mirrored)");
      return r.error();
    }
  } else {
    c.release = &vllm_releases().front();
  }
  r.allow("vllm_version");
  const VllmRelease& rel = *c.release;

  c.long_prefill_token_threshold =
      static_cast<int32_t>(r.integer("long_prefill_token_threshold", 0, 0, INT32_MAX));
  if (rel.has_adaptive_threshold) {
    c.long_prefill_token_threshold_adaptive =
        r.boolean("long_prefill_token_threshold_adaptive", false);
  } else {
    refuse_missing(r, "long_prefill_token_threshold_adaptive", rel,
                   "the threshold is the threshold");
  }
  if (rel.has_reserve_full_isl) {
    c.scheduler_reserve_full_isl = r.boolean("scheduler_reserve_full_isl", true);
  } else {
    c.scheduler_reserve_full_isl = false;
    refuse_missing(r, "scheduler_reserve_full_isl", rel,
                   "admission checks only the first chunk, as false does");
  }
  c.priority = r.choice("scheduling_policy", "fcfs", {"fcfs", "priority"}) == "priority";
  if (c.priority && !rel.priority_mirrored) {
    r.refuse("scheduling_policy",
             "vLLM " + std::string(rel.version) +
                 "'s priority scheduling keeps the tokens of a request it preempts in the step, "
                 "and fails when two requests tie on priority and arrival time (both fixed "
                 "since); servesim mirrors priority scheduling as vLLM " +
                 default_version + " does: set vllm_version = \"" + default_version + "\"");
  }
  if (prefix_cached) c.lpm = r.choice("order", "fcfs", {"fcfs", "lpm"}) == "lpm";
  if (c.lpm && c.priority) {
    r.refuse("order",
             "order = \"lpm\" (SGLang's longest prefix match) and scheduling_policy = "
             "\"priority\" (vLLM's) are two different queue orders; choose one");
  }
  for (std::string_view key : {"max_num_partial_prefills", "max_long_partial_prefills"}) {
    r.refuse(key,
             "vLLM's V1 scheduler has no such option (it was V0's: vLLM 0.11.0 refuses any "
             "value but 1, and " + default_version + " does not know it): any number of "
             "requests prefill side by side, and long_prefill_token_threshold caps what each "
             "computes per iteration");
  }
  r.reject_unknown();
  if (!r.ok()) return r.error();
  return c;
}

toml::table VllmSchedulerConfig::to_toml(bool prefix_cached) const {
  toml::table t{{"vllm_version", std::string(release->version)},
                {"long_prefill_token_threshold", long_prefill_token_threshold},
                {"scheduling_policy", priority ? "priority" : "fcfs"}};
  if (release->has_adaptive_threshold) {
    t.insert("long_prefill_token_threshold_adaptive", long_prefill_token_threshold_adaptive);
  }
  if (release->has_reserve_full_isl) {
    t.insert("scheduler_reserve_full_isl", scheduler_reserve_full_isl);
  }
  if (prefix_cached) t.insert("order", lpm ? "lpm" : "fcfs");
  return t;
}

}  // namespace servesim
