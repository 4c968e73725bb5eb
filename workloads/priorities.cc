#include "workloads/priorities.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sim/config/toml_fields.h"
#include "workloads/rng.h"

namespace servesim {

Result<PriorityOptions> read_priority_options(const toml::table& table, const std::string& path,
                                              const std::string& name) {
  const TableFields f(table, path, name);
  if (Status s = f.check_known({"values", "weights"}); !s) return s.error();
  if (Status s = f.require("values"); !s) return s.error();
  PriorityOptions out;
  const toml::array* values = table.get("values")->as_array();
  const std::string want_values = "a non-empty array of integers, like [0, 1, 2]";
  if (values == nullptr) return f.expected("values", want_values);
  if (values->empty()) return f.error_at_key("values", "expected " + want_values + ", got an empty array");
  for (size_t i = 0; i < values->size(); ++i) {
    const toml::node& v = *values->get(i);
    const auto* n = v.as_integer();
    if (n == nullptr || n->get() < std::numeric_limits<int32_t>::min() ||
        n->get() > std::numeric_limits<int32_t>::max()) {
      return error_at(path, v.source().begin, f.key_name("values") + "[" + std::to_string(i) + "]",
                      "expected a 32-bit integer, got " + describe_value(v));
    }
    out.values.push_back(static_cast<int32_t>(n->get()));
  }
  if (!f.has("weights")) {
    out.weights.assign(out.values.size(), 1.0);
    return out;
  }
  const toml::array* weights = table.get("weights")->as_array();
  if (weights == nullptr || weights->size() != values->size()) {
    return f.expected("weights", "an array of " + std::to_string(values->size()) +
                                     " numbers >= 0, one per value");
  }
  for (size_t i = 0; i < weights->size(); ++i) {
    const toml::node& v = *weights->get(i);
    const std::optional<double> w = v.value<double>();
    if (!w || !std::isfinite(*w) || *w < 0) {
      return error_at(path, v.source().begin, f.key_name("weights") + "[" + std::to_string(i) + "]",
                      "expected a finite number >= 0, got " + describe_value(v));
    }
    out.weights.push_back(*w);
  }
  if (std::accumulate(out.weights.begin(), out.weights.end(), 0.0) <= 0) {
    return f.error_at_key("weights", "all weights are 0: no value could be drawn");
  }
  return out;
}

PriorityPicker::PriorityPicker(const PriorityOptions& options, uint64_t seed)
    : values_(options.values), cdf_(options.weights.size()), rng_(Rng::stream(seed, kPriorityStream)) {
  std::partial_sum(options.weights.begin(), options.weights.end(), cdf_.begin());
}

int32_t PriorityPicker::draw() {
  const auto last = static_cast<std::ptrdiff_t>(cdf_.size()) - 1;
  const double x = rng_.uniform() * cdf_.back();
  const auto k = std::min(last, std::upper_bound(cdf_.begin(), cdf_.end(), x) - cdf_.begin());
  return values_[static_cast<size_t>(k)];
}

void assign_priorities(const PriorityOptions& options, uint64_t seed,
                       std::vector<RequestSpec>& requests) {
  PriorityPicker picker(options, seed);
  for (RequestSpec& r : requests) r.priority = picker.draw();
}

}  // namespace servesim
