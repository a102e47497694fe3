// runtime/nn/padding.cpp — the padding modules (ferry/nn/padding.hpp): ferry::pad with the
// module's mode and sizes.
#include "ferry/nn/padding.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ferry/error.hpp"
#include "ferry/ops_shape.hpp"

namespace ferry::nn {

PadNd::PadNd(const char* type, int dims_, std::string mode_, std::vector<std::int64_t> sizes,
             double value_)
    : dims(dims_), mode(std::move(mode_)), value(value_) {
  if (sizes.size() == 1) sizes.assign(std::size_t(2 * dims), sizes[0]);
  if (sizes.size() != std::size_t(2 * dims))
    throw ShapeError(fmt::format("{}: padding takes 1 or {} sizes, got {} ({})", type, 2 * dims,
                                 sizes.size(), fmt::join(sizes, ", ")));
  padding = std::move(sizes);
}

Tensor PadNd::forward(const Tensor& x) { return pad(x, padding, mode, value); }

std::string PadNd::extra_repr() const {
  if (mode == "constant" && value != 0)
    return fmt::format("padding=({}), value={}", fmt::join(padding, ", "), value);
  return fmt::format("({})", fmt::join(padding, ", "));
}

}  // namespace ferry::nn
