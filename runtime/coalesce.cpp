// runtime/coalesce.cpp — see include/ferry/kit/coalesce.hpp.
#include "ferry/kit/coalesce.hpp"

namespace ferry::detail {

Coalesced coalesce(std::span<const std::int64_t> sizes,
                   const std::vector<std::vector<std::int64_t>>& strides) {
  Coalesced c;
  c.strides.resize(strides.size());
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = !c.sizes.empty();
    for (std::size_t t = 0; merge && t < strides.size(); ++t)
      merge = c.strides[t].back() == strides[t][d] * sizes[d];
    if (merge) {
      c.sizes.back() *= sizes[d];
      for (std::size_t t = 0; t < strides.size(); ++t) c.strides[t].back() = strides[t][d];
    } else {
      c.sizes.push_back(sizes[d]);
      for (std::size_t t = 0; t < strides.size(); ++t) c.strides[t].push_back(strides[t][d]);
    }
  }
  if (c.sizes.empty()) {
    c.sizes.push_back(1);
    for (auto& s : c.strides) s.push_back(0);
  }
  return c;
}

}  // namespace ferry::detail
