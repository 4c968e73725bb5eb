// The lookup every registry shares (policies, routers, backends): an entry by its name, or the
// names that exist.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace servesim {

// The entry of `all` named `name` (nullptr if none), and the names of all, comma-separated, into
// *known.
template <typename Info>
const Info* find_by_name(const std::vector<Info>& all, std::string_view name, std::string* known) {
  const Info* found = nullptr;
  for (const Info& info : all) {
    if (info.name == name && found == nullptr) found = &info;
    *known += (known->empty() ? "" : ", ") + std::string(info.name);
  }
  return found;
}

}  // namespace servesim
