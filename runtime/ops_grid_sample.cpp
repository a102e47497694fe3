// runtime/ops_grid_sample.cpp — grid_sample and affine_grid, PyTorch's spatial transformer
// pair, composed of ops (Note [Sampling at a grid as gathers] in ferry/ops_resample.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string>
#include <vector>

#include "autocast_internal.hpp"
#include "autograd/formulas.hpp"
#include "dispatch.hpp"
#include "ferry/backend.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

enum class Padding { zeros, border, reflection };

// PyTorch's grid_sampler_unnormalize: a coordinate in [-1, 1] to pixels, -1 and 1 the corner
// pixels' centres (align_corners) or their outer edges.
Tensor unnormalize(const Tensor& c, std::int64_t size, bool align) {
  const double n = static_cast<double>(size);
  return align ? (c + 1.0) * ((n - 1) / 2) : ((c + 1.0) * n - 1.0) / 2;
}

// PyTorch's reflect_coordinates: c reflected off the bounds twice_low / 2 and twice_high / 2
// until it lies between them. abs and fmod carry the gradient's sign as PyTorch's
// reflect_coordinates_set_grad does; floor (which reflection) carries none.
Tensor reflect(const Tensor& c, std::int64_t twice_low, std::int64_t twice_high) {
  if (twice_low == twice_high) return zeros_like(c);
  const double low = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  const Tensor in = abs(c - low);
  const Tensor extra = fmod(in, span);
  const Tensor even = eq(fmod(floor(in / span), 2.0), 0.0);
  return where(even, extra + low, span - extra + low);
}

// PyTorch's compute_coordinates: the padding mode applied to a pixel coordinate (border and
// reflection keep it inside [0, size - 1]; zeros leaves it, for the reads to find nothing).
Tensor pad_coordinate(const Tensor& c, std::int64_t size, Padding padding, bool align) {
  if (padding == Padding::zeros) return c;
  const Tensor r = padding == Padding::border ? c
                   : align                    ? reflect(c, 0, 2 * (size - 1))
                                              : reflect(c, -1, 2 * size - 1);
  return clamp(r, Scalar(0.0), Scalar(static_cast<double>(size - 1)));
}

// One spatial dim's reads: the pixel coordinates each output position reads along it
// (integer-valued, no gradient) and their weights (differentiable; none for nearest).
struct AxisReads {
  std::vector<Tensor> at, weight;
};

// Keys' cubic convolution with A = -0.75 at distance t from the left neighbour: PyTorch's
// get_cubic_upsample_coefficients, the weights of pixels floor - 1 ... floor + 2.
std::vector<Tensor> cubic_weights(const Tensor& t) {
  constexpr double A = -0.75;
  const auto near = [](const Tensor& x) { return ((x * (A + 2) - (A + 3)) * x) * x + 1.0; };
  const auto far = [](const Tensor& x) { return ((x * A - 5 * A) * x + 8 * A) * x - 4 * A; };
  const Tensor u = 1.0 - t;
  return {far(t + 1.0), near(t), near(u), far(u + 1.0)};
}

AxisReads axis_reads(const Tensor& g, std::int64_t size, std::string_view mode, Padding padding,
                     bool align) {
  AxisReads r;
  const Tensor c = unnormalize(g, size, align);
  if (mode == "bicubic") {  // PyTorch pads each of the 4 taps, not the coordinate
    const Tensor lo = floor(c).detach();
    r.weight = cubic_weights(c - lo);
    for (int k = -1; k <= 2; ++k)
      r.at.push_back(pad_coordinate(lo + double(k), size, padding, align));
    return r;
  }
  const Tensor p = pad_coordinate(c, size, padding, align);
  if (mode == "nearest") {
    r.at.push_back(round(p).detach());  // half to even, as PyTorch's nearbyint
    // A step function of the grid: its gradient is zeros (PyTorch's), through a weight of 1.
    if (p.requires_grad()) r.weight.push_back((p - p.detach()) * 0.0 + 1.0);
    return r;
  }
  const Tensor lo = floor(p).detach(), hi_w = p - lo;
  r.at = {lo, lo + 1.0};
  r.weight = {1.0 - hi_w, hi_w};
  return r;
}

// Whether a coordinate reads a pixel: within [0, size - 1] (NaN is not).
Tensor inside(const Tensor& at, std::int64_t size) {
  return logical_and(ge(at, 0.0), le(at, static_cast<double>(size - 1)));
}

Padding padding_of(std::string_view p) {
  if (p == "zeros") return Padding::zeros;
  if (p == "border") return Padding::border;
  if (p == "reflection") return Padding::reflection;
  throw ValueError(fmt::format(
      "grid_sample: expected padding_mode to be 'zeros', 'border', or 'reflection', but got: '{}'",
      p));
}

}  // namespace

Tensor grid_sample(const Tensor& input, const Tensor& grid, std::string_view mode,
                   std::string_view padding_mode, bool align_corners) {
  if (ferry::detail::autocast_applies(OpId::grid_sample)) {
    const ferry::detail::AutocastOp ac(OpId::grid_sample, {&input, &grid});
    return grid_sample(ac(input), ac(grid), mode, padding_mode, align_corners);
  }
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    throw ValueError(fmt::format(
        "grid_sample: expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: '{}'",
        mode));
  const Padding padding = padding_of(padding_mode);
  if (!input.defined() || !grid.defined())
    throw Error("grid_sample: the input and the grid must be defined");
  detail::check_same_device("grid_sample", {{"input", &input}, {"grid", &grid}});
  detail::check_dtype(OpId::grid_sample, input);
  if (grid.dtype() != input.dtype())
    throw DTypeError(fmt::format(
        "grid_sample: expected input and grid to have same dtype, but input has {} and grid has {}",
        dtype_name(input.dtype()), dtype_name(grid.dtype())));
  const std::int64_t dims = input.dim() - 2;
  if ((input.dim() != 4 && input.dim() != 5) || grid.dim() != input.dim())
    throw ShapeError(fmt::format(
        "grid_sample: expected 4D or 5D input and grid with same number of dimensions, but got "
        "input with sizes {} and grid with sizes {}",
        shape_str(input.sizes()), shape_str(grid.sizes())));
  if (grid.size(0) != input.size(0))
    throw ShapeError(fmt::format(
        "grid_sample: expected grid and input to have same batch size, but got input with sizes "
        "{} and grid with sizes {}",
        shape_str(input.sizes()), shape_str(grid.sizes())));
  if (grid.size(-1) != dims)
    throw ShapeError(fmt::format(
        "grid_sample: expected grid to have size {} in last dimension, but got grid with sizes {}",
        dims, shape_str(grid.sizes())));
  for (std::int64_t d = 2; d < input.dim(); ++d)
    if (input.size(d) == 0)
      throw ShapeError(fmt::format(
          "grid_sample: expected input to have non-empty spatial dimensions, but input has sizes "
          "{} with dimension {} being empty",
          shape_str(input.sizes()), d));
  if (mode == "bicubic" && dims != 2)
    throw ShapeError(fmt::format(
        "grid_sample: bicubic interpolation only supports 4D input, got input with sizes {}",
        shape_str(input.sizes())));
  const std::int64_t n = input.size(0), channels = input.size(1);
  Shape out{n, channels};
  std::int64_t points = 1, pixels = 1;
  for (std::int64_t d = 1; d <= dims; ++d) out.push_back(grid.size(d)), points *= grid.size(d);
  for (std::int64_t d = 2; d < input.dim(); ++d) pixels *= input.size(d);
  if (n * channels * points == 0)  // nothing to sample; still a node autograd can pass
    // through (the gradients are zeros), as PyTorch's empty result has one.
    return zeros(out, {.dtype = input.dtype(), .device = input.device()}) +
           ((sum(input) + sum(grid)) * 0.0).to(input.dtype());
  if (detail::use_fused_kernel_with_backward(input, OpId::grid_sample)) {
    const Tensor xc = input.contiguous(), gc = grid.contiguous();
    Attrs attrs;
    attrs.set("mode", std::string(mode))
        .set("padding_mode", std::string(padding_mode))
        .set("align_corners", align_corners);
    Tensor y;
    {
      NoGradGuard no_grad;
      y = detail::new_tensor(out, input.dtype(), detail::impl_of(input));
      detail::run_kernel(OpId::grid_sample, {xc, gc}, {y}, attrs);
    }
    autograd::record_grid_sample(xc, gc, attrs, y);
    return y;
  }
  // The coordinates and weights in f32 for 16-bit inputs (their opmath: an f16 coordinate is
  // half a pixel apart at 1024), rounded to the input's dtype once, as weights.
  const DType dt = input.dtype();
  const bool narrow = dt == DType::f16 || dt == DType::bf16;
  const Tensor g = narrow ? grid.to(DType::f32) : grid;
  // The grid's last dim is (x, y[, z]): the input's last spatial dim first.
  std::vector<AxisReads> axes;
  std::vector<std::int64_t> sizes, strides;
  std::int64_t stride = 1;
  for (std::int64_t k = 0; k < dims; ++k) {
    const std::int64_t size = input.size(input.dim() - 1 - k);
    axes.push_back(axis_reads(g.select(-1, k), size, mode, padding, align_corners));
    sizes.push_back(size), strides.push_back(stride);
    stride *= size;
  }
  // Each read is a row of the input as [N · pixels, C] (its channels side by side: a
  // channels-last input is that already), chosen by index_select, whose gradient is an
  // index_add of rows.
  Shape channels_last{0};
  for (std::int64_t d = 2; d < input.dim(); ++d) channels_last.push_back(d);
  channels_last.push_back(1);
  const Tensor rows = input.permute(channels_last).reshape({n * pixels, channels});
  const Tensor batch_base =
      (arange(n, {.dtype = DType::i64, .device = input.device()}) * pixels).reshape({n, 1});
  Tensor acc;
  std::vector<std::size_t> tap(static_cast<std::size_t>(dims), 0);
  while (true) {
    Tensor index, valid, weight;
    for (std::size_t k = 0; k < tap.size(); ++k) {
      const AxisReads& a = axes[k];
      const Tensor& at = a.at[tap[k]];
      const Tensor in = inside(at, sizes[k]);
      // A tap outside (or a point that is not finite) reads pixel 0 at weight 0.
      const Tensor pixel = where(in, at, Scalar(0.0)).to(DType::i64) * strides[k];
      index = index.defined() ? index + pixel : pixel;
      valid = valid.defined() ? logical_and(valid, in) : in;
      if (!a.weight.empty())
        weight = weight.defined() ? weight * a.weight[tap[k]] : a.weight[tap[k]];
    }
    const Tensor picked =
        index_select(rows, 0, (index.reshape({n, points}) + batch_base).reshape({n * points}));
    const Tensor w = (weight.defined() ? where(valid, weight, Scalar(0.0)) : valid.to(g.dtype()))
                         .to(dt)
                         .reshape({n * points, 1});
    const Tensor term = picked * w;
    acc = acc.defined() ? acc + term : term;
    std::size_t k = 0;
    while (k < tap.size() && ++tap[k] == axes[k].at.size()) tap[k++] = 0;
    if (k == tap.size()) break;
  }
  // [N · points, C] -> [N, C, *out], contiguous as PyTorch's.
  Shape split{n};
  for (std::int64_t d = 1; d <= dims; ++d) split.push_back(grid.size(d));
  split.push_back(channels);
  Shape to_nc{0, dims + 1};
  for (std::int64_t d = 1; d <= dims; ++d) to_nc.push_back(d);
  return acc.reshape(split).permute(to_nc).contiguous();
}

Tensor affine_grid(const Tensor& theta, const std::vector<std::int64_t>& size, bool align_corners) {
  if (!theta.defined()) throw Error("affine_grid: theta must be defined");
  if (!is_floating(theta.dtype()))
    throw DTypeError(
        fmt::format("affine_grid: expected theta to have floating point type, but got {}",
                    dtype_name(theta.dtype())));
  detail::check_dtype(OpId::affine_grid, theta);
  if (size.size() != 4 && size.size() != 5)
    throw ShapeError(
        fmt::format("affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                    "respectively. Got size [{}].",
                    fmt::join(size, ", ")));
  for (std::int64_t s : size)
    if (s <= 0)
      throw ShapeError(
          fmt::format("affine_grid: expected non-zero, positive output size. Got [{}].",
                      fmt::join(size, ", ")));
  const std::int64_t dims = static_cast<std::int64_t>(size.size()) - 2;
  if (theta.dim() != 3 || theta.size(0) != size[0] || theta.size(1) != dims ||
      theta.size(2) != dims + 1)
    throw ShapeError(fmt::format(
        "affine_grid: expected a batch of {}D affine matrices of shape Nx{}x{} for size [{}]. "
        "Got {}.",
        dims, dims, dims + 1, fmt::join(size, ", "), shape_str(theta.sizes())));
  // The base grid [*out, dims + 1]: (x, y[, z], 1) at each output position, x along the last
  // dim; PyTorch's linspace_from_neg_one (0 for a size of 1; the pixel centres without
  // align_corners).
  const TensorOptions on{.dtype = theta.dtype(), .device = theta.device()};
  const auto axis = [&](std::int64_t steps) {
    if (steps <= 1) return zeros({steps}, on);
    const Tensor r = linspace(-1.0, 1.0, steps, on);
    return align_corners ? r : r * (double(steps - 1) / double(steps));
  };
  Shape spatial(size.begin() + 2, size.end()), column = spatial;
  column.push_back(1);
  std::vector<Tensor> parts;
  for (std::int64_t k = 0; k < dims; ++k) {  // x, y[, z]: the last spatial dim first
    const std::int64_t d = dims - 1 - k;
    Shape along(static_cast<std::size_t>(dims) + 1, 1);
    along[static_cast<std::size_t>(d)] = spatial[static_cast<std::size_t>(d)];
    parts.push_back(axis(spatial[static_cast<std::size_t>(d)]).reshape(along).expand(column));
  }
  parts.push_back(ones(column, on));
  std::int64_t points = 1;
  for (std::int64_t s : spatial) points *= s;
  const Tensor base = cat(parts, dims).reshape({points, dims + 1});
  Shape out{size[0]};
  out.insert(out.end(), spatial.begin(), spatial.end());
  out.push_back(dims);
  return matmul(base, theta.transpose(1, 2)).reshape(out);
}

}  // namespace ferry
