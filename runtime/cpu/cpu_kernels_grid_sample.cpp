// runtime/cpu/cpu_kernels_grid_sample.cpp — grid_sample and its backward row on the CPU
// (docs/kernel-contract.md), every mode and padding mode in 2 and 3 spatial dims.
//
// Note [Sampling at a grid on the CPU]
// Composed (Note [Sampling at a grid as gathers] in ferry/ops_resample.hpp), grid_sample
// makes some twenty tensors as large as the grid per tap and gathers whole rows of channels;
// its backward as many again. The kernel works an image at a time in two passes. First, per
// output point, its taps: the pixel each reads (an index into the image's plane), its weight
// and, for the backward, the weight's derivative along each grid coordinate with the chain
// through unnormalizing and padding folded in (PyTorch's formulas: clip_coordinates_set_grad,
// reflect_coordinates_set_grad, the cubic coefficients' derivative). A tap that falls outside
// the input (or a point that is not finite) weighs 0 at pixel 0. Then per channel plane, which
// stays in cache: y[p] = Σ_t w[t] · x[idx[t]]. The backward adds g[p] · w[t] into dx's plane at
// idx[t] (a plane a task, in point order: deterministic) and, for the grid, per point the sum
// over channels of g[p] · Σ_t dw[t] · x[idx[t]] (points split over the threads, channels
// summed in order). Nearest's grid gradient is zeros, as PyTorch's. In the compute type
// (f32 for the 16-bit floats, as PyTorch's opmath).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "cpu/cpu_backend.hpp"
#include "cpu/cpu_cnn.hpp"
#include "cpu/cpu_loops.hpp"

namespace ferry::cpu {
namespace {

enum class Mode { bilinear, nearest, bicubic };
enum class Padding { zeros, border, reflection };

// The call's geometry: dims spatial dims, the input's sizes in the grid's (x, y[, z]) order.
struct GridGeometry {
  Mode mode;
  Padding padding;
  bool align;
  std::int64_t n, c, dims, pixels, points;
  std::array<std::int64_t, 3> size;    // along x, y, z: W, H, D
  std::array<std::int64_t, 3> stride;  // a pixel's step along each, in the plane
  std::int64_t taps() const {
    return mode == Mode::nearest ? 1 : mode == Mode::bicubic ? 16 : (dims == 2 ? 4 : 8);
  }
};

// x [N, C, *in] and grid [N, *out, dims] (dims 2 or 3), `field` [N, C, *out] (y, or g),
// contiguous, one floating dtype; attrs mode, padding_mode, align_corners.
GridGeometry grid_geometry(const OpCall& call, const TensorArg& x, const TensorArg& grid,
                           const TensorArg& field) {
  const std::int64_t nd = x.ndim(), dims = nd - 2;
  bool ok = (nd == 4 || nd == 5) && grid.ndim() == nd && field.ndim() == nd &&
            grid.sizes[0] == x.sizes[0] && grid.sizes[std::size_t(nd - 1)] == dims &&
            field.sizes[0] == x.sizes[0] && field.sizes[1] == x.sizes[1] && grid.dtype == x.dtype &&
            field.dtype == x.dtype && is_floating(x.dtype);
  for (std::int64_t d = 0; ok && d < dims; ++d)
    ok = field.sizes[std::size_t(d + 2)] == grid.sizes[std::size_t(d + 1)] &&
         x.sizes[std::size_t(d + 2)] > 0;
  if (!ok)
    throw ShapeError(fmt::format(
        "{}: expected x [N, C, *in], grid [N, *out, dims] and [N, C, *out] of one floating dtype "
        "(dims 2 or 3), got {} {}, {} {} and {} {}",
        call.name(), dtype_name(x.dtype), fmt::join(x.sizes, "x"), dtype_name(grid.dtype),
        fmt::join(grid.sizes, "x"), dtype_name(field.dtype), fmt::join(field.sizes, "x")));
  for (const TensorArg* t : {&x, &grid, &field})
    if (!t->is_contiguous())
      throw Error(fmt::format("{}: the cpu kernel takes contiguous operands, got strides {}",
                              call.name(), fmt::join(t->strides, ", ")));
  const std::string& mode = call.attrs.s("mode");
  const std::string& padding = call.attrs.s("padding_mode");
  GridGeometry g{};
  g.mode = mode == "nearest" ? Mode::nearest : mode == "bicubic" ? Mode::bicubic : Mode::bilinear;
  g.padding = padding == "border"       ? Padding::border
              : padding == "reflection" ? Padding::reflection
                                        : Padding::zeros;
  if ((mode != "bilinear" && mode != "nearest" && mode != "bicubic") ||
      (padding != "zeros" && padding != "border" && padding != "reflection") ||
      (g.mode == Mode::bicubic && dims != 2))
    throw ValueError(
        fmt::format("{}: mode '{}' with padding_mode '{}' in {} dims is not one of "
                    "PyTorch's grid samplers",
                    call.name(), mode, padding, dims));
  g.align = call.attrs.b("align_corners");
  g.n = x.sizes[0], g.c = x.sizes[1], g.dims = dims, g.pixels = 1, g.points = 1;
  for (std::int64_t k = 0; k < dims; ++k) {
    g.size[std::size_t(k)] = x.sizes[std::size_t(nd - 1 - k)];
    g.stride[std::size_t(k)] = g.pixels;
    g.pixels *= g.size[std::size_t(k)];
    g.points *= grid.sizes[std::size_t(k + 1)];
  }
  return g;
}

// A pixel coordinate and its derivative with respect to the grid value it came from.
template <class C> struct Coord { C at, d; };

template <class C> Coord<C> unnormalize(C v, std::int64_t size, bool align) {
  const C s = C(size);
  return align ? Coord<C>{(v + 1) / 2 * (s - 1), (s - 1) / 2}
               : Coord<C>{((v + 1) * s - 1) / 2, s / 2};
}

// PyTorch's reflect_coordinates_set_grad: c folded between twice_low / 2 and twice_high / 2.
template <class C> Coord<C> reflect(Coord<C> c, std::int64_t twice_low, std::int64_t twice_high) {
  if (twice_low == twice_high) return {C(0), C(0)};
  const C low = C(twice_low) / 2, span = C(twice_high - twice_low) / 2;
  C in = c.at - low, sign = 1;
  if (in < 0) sign = -1, in = -in;
  const C extra = std::fmod(in, span);
  const bool even = std::fmod(std::floor(in / span), C(2)) == 0;
  return even ? Coord<C>{extra + low, c.d * sign} : Coord<C>{span - extra + low, -c.d * sign};
}

// PyTorch's compute_coordinates (with the _set_grad chain): border clips into [0, size - 1]
// (gradient 0 where it clips), reflection folds then clips, zeros leaves c.
template <class C> Coord<C> pad(Coord<C> c, std::int64_t size, Padding p, bool align) {
  if (p == Padding::zeros) return c;
  if (p == Padding::reflection)
    c = align ? reflect(c, 0, 2 * (size - 1)) : reflect(c, -1, 2 * size - 1);
  if (c.at <= 0) return {C(0), C(0)};
  if (c.at >= C(size - 1)) return {C(size - 1), C(0)};
  return c;
}

// An integer-valued coordinate as a pixel along a dim, or -1 outside [0, size - 1] (NaN too).
template <class C> std::int64_t pixel(C v, std::int64_t size) {
  return v >= 0 && v <= C(size - 1) ? std::int64_t(v) : -1;
}

// Keys' cubic convolution (A = -0.75) at distance t past the left neighbour: the weights of
// pixels floor - 1 ... floor + 2, and their derivatives with respect to t.
template <class C> void cubic(C t, C w[4], C dw[4]) {
  constexpr C A = C(-0.75);
  const auto near = [](C x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  const auto far = [](C x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  const auto dnear = [](C x) { return (3 * (A + 2) * x - 2 * (A + 3)) * x; };
  const auto dfar = [](C x) { return (3 * A * x - 10 * A) * x + 8 * A; };
  w[0] = far(t + 1), w[1] = near(t), w[2] = near(1 - t), w[3] = far(2 - t);
  dw[0] = dfar(t + 1), dw[1] = dnear(t), dw[2] = -dnear(1 - t), dw[3] = -dfar(2 - t);
}

// Every point's taps for one image: idx[p · T + t] (a pixel of the plane), w, and with
// `derivatives` dw[k][p · T + t], the weight's derivative along grid coordinate k.
template <class C> struct Taps {
  std::vector<std::int64_t> idx;
  std::vector<C> w;
  std::array<std::vector<C>, 3> dw;
};

template <typename T, class C> void point_taps(const GridGeometry& g, const T* gp, std::int64_t p,
                                               bool derivatives, Taps<C>& out) {
  const std::int64_t T_ = g.taps(), dims = g.dims, base = p * T_;
  // Per dim: up to 4 pixels along it, their 1-D weights and the weights' derivatives.
  std::int64_t at[3][4];
  C w1[3][4], dw1[3][4];
  int per = 1;
  bool finite = true;
  for (std::int64_t k = 0; k < dims; ++k) {
    const std::int64_t size = g.size[std::size_t(k)];
    const Coord<C> u = unnormalize(C(gp[p * dims + k]), size, g.align);
    finite = finite && std::isfinite(u.at);
    if (!finite) break;
    if (g.mode == Mode::bicubic) {  // PyTorch pads each tap, not the point
      const C lo = std::floor(u.at);
      C cw[4], cdw[4];
      cubic(u.at - lo, cw, cdw);
      for (int i = 0; i < 4; ++i) {
        at[k][i] = pixel(pad(Coord<C>{lo - 1 + C(i), C(1)}, size, g.padding, g.align).at, size);
        w1[k][i] = cw[i], dw1[k][i] = cdw[i] * u.d;
      }
      per = 4;
    } else {
      const Coord<C> c = pad(u, size, g.padding, g.align);
      if (g.mode == Mode::nearest) {
        at[k][0] = pixel(std::nearbyint(c.at), size), w1[k][0] = 1, dw1[k][0] = 0;
        per = 1;
      } else {
        const C lo = std::floor(c.at), t = c.at - lo;
        at[k][0] = pixel(lo, size), at[k][1] = pixel(lo + 1, size);
        w1[k][0] = 1 - t, w1[k][1] = t, dw1[k][0] = -c.d, dw1[k][1] = c.d;
        per = 2;
      }
    }
  }
  for (std::int64_t t = 0; t < T_; ++t) {
    // Tap t is digit t_k in base `per` along each dim k (x fastest).
    std::int64_t index = 0, rest = t;
    C w = 1;
    C dw[3] = {1, 1, 1};
    bool inside = finite;
    for (std::int64_t k = 0; inside && k < dims; ++k) {
      const std::int64_t i = rest % per;
      rest /= per;
      inside = at[k][i] >= 0;
      index += at[k][i] * g.stride[std::size_t(k)];
      w *= w1[k][i];
      for (std::int64_t j = 0; j < dims; ++j) dw[j] *= j == k ? dw1[k][i] : w1[k][i];
    }
    out.idx[std::size_t(base + t)] = inside ? index : 0;
    out.w[std::size_t(base + t)] = inside ? w : C(0);
    if (derivatives)
      for (std::int64_t k = 0; k < dims; ++k)
        out.dw[std::size_t(k)][std::size_t(base + t)] = inside ? dw[k] : C(0);
  }
}

template <typename T, class C>
void image_taps(const GridGeometry& g, const T* gp, bool derivatives, Taps<C>& out) {
  const std::int64_t n = g.points * g.taps();
  out.idx.resize(std::size_t(n));
  out.w.resize(std::size_t(n));
  for (std::int64_t k = 0; k < g.dims; ++k)
    out.dw[std::size_t(k)].resize(derivatives ? std::size_t(n) : 0);
  parallel_range(g.points, grain_for(g.taps() * 8), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) point_taps<T, C>(g, gp, p, derivatives, out);
  });
}

constexpr std::int64_t kChunk = 1024;  // points a task, in a plane

template <typename T> void grid_sample_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &x = call.inputs.at(0), &grid = call.inputs.at(1), &y = call.outputs.at(0);
  const GridGeometry g = grid_geometry(call, x, grid, y);
  const std::int64_t TP = g.taps(), chunks = (g.points + kChunk - 1) / kChunk;
  Taps<C> taps;
  for (std::int64_t n = 0; n < g.n; ++n) {
    image_taps<T, C>(g, grid.data<T>() + n * g.points * g.dims, false, taps);
    const T* xn = x.data<T>() + n * g.c * g.pixels;
    T* yn = y.data<T>() + n * g.c * g.points;
    parallel_range(g.c * chunks, grain_for(kChunk * TP), [&](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t task = t0; task < t1; ++task) {
        const std::int64_t c = task / chunks, p0 = task % chunks * kChunk;
        const std::int64_t p1 = std::min(g.points, p0 + kChunk);
        const T* plane = xn + c * g.pixels;
        for (std::int64_t p = p0; p < p1; ++p) {
          const std::int64_t* idx = taps.idx.data() + p * TP;
          const C* w = taps.w.data() + p * TP;
          C acc = 0;
          for (std::int64_t t = 0; t < TP; ++t) acc += w[t] * C(plane[idx[t]]);
          yn[c * g.points + p] = T(acc);
        }
      }
    });
  }
}

// Inputs g [N, C, *out], x, grid; outputs dx [N, C, *in] and dgrid [N, *out, dims], each
// written when its attr (input_grad, grid_grad) says it is wanted; one not wanted may be empty.
template <typename T> void grid_sample_backward_kernel(const OpCall& call) {
  using C = compute_t<T>;
  const TensorArg &go = call.inputs.at(0), &x = call.inputs.at(1), &grid = call.inputs.at(2);
  const TensorArg &dx = call.outputs.at(0), &dgrid = call.outputs.at(1);
  const GridGeometry g = grid_geometry(call, x, grid, go);
  const bool want_dx = call.attrs.b("input_grad");
  const bool want_dgrid = call.attrs.b("grid_grad") && g.mode != Mode::nearest;
  const auto fits = [&](const TensorArg& out, const TensorArg& like, bool wanted) {
    if (!wanted && out.numel() == 0) return true;
    return out.sizes == like.sizes && out.dtype == like.dtype && out.is_contiguous();
  };
  if (!fits(dx, x, want_dx) || !fits(dgrid, grid, call.attrs.b("grid_grad")))
    throw ShapeError(
        fmt::format("{}: expected dx like x ({}) and dgrid like the grid ({}), "
                    "contiguous (or empty where not wanted), got {} and {}",
                    call.name(), fmt::join(x.sizes, "x"), fmt::join(grid.sizes, "x"),
                    fmt::join(dx.sizes, "x"), fmt::join(dgrid.sizes, "x")));
  if (call.attrs.b("grid_grad") && g.mode == Mode::nearest)  // a step function of the grid
    std::fill(dgrid.data<T>(), dgrid.data<T>() + dgrid.numel(), T(0));
  const std::int64_t TP = g.taps(), chunks = (g.points + kChunk - 1) / kChunk;
  Taps<C> taps;
  for (std::int64_t n = 0; n < g.n; ++n) {
    image_taps<T, C>(g, grid.data<T>() + n * g.points * g.dims, want_dgrid, taps);
    const T* xn = x.data<T>() + n * g.c * g.pixels;
    const T* gn = go.data<T>() + n * g.c * g.points;
    if (want_dx) {
      T* dn = dx.data<T>() + n * g.c * g.pixels;
      parallel_range(g.c, grain_for(g.points * TP), [&](std::int64_t c0, std::int64_t c1) {
        std::vector<C> plane(std::size_t(g.pixels));
        for (std::int64_t c = c0; c < c1; ++c) {
          std::fill(plane.begin(), plane.end(), C(0));
          const T* gc = gn + c * g.points;
          for (std::int64_t p = 0; p < g.points; ++p) {
            const C gv = C(gc[p]);
            const std::int64_t* idx = taps.idx.data() + p * TP;
            const C* w = taps.w.data() + p * TP;
            for (std::int64_t t = 0; t < TP; ++t) plane[std::size_t(idx[t])] += w[t] * gv;
          }
          T* d = dn + c * g.pixels;
          for (std::int64_t i = 0; i < g.pixels; ++i) d[i] = T(plane[std::size_t(i)]);
        }
      });
    }
    if (want_dgrid) {
      T* dg = dgrid.data<T>() + n * g.points * g.dims;
      parallel_range(chunks, grain_for(kChunk * TP * g.c), [&](std::int64_t k0, std::int64_t k1) {
        std::vector<C> acc(std::size_t(kChunk * g.dims));
        for (std::int64_t chunk = k0; chunk < k1; ++chunk) {
          const std::int64_t p0 = chunk * kChunk, p1 = std::min(g.points, p0 + kChunk);
          std::fill(acc.begin(), acc.end(), C(0));
          for (std::int64_t c = 0; c < g.c; ++c) {
            const T* plane = xn + c * g.pixels;
            const T* gc = gn + c * g.points;
            for (std::int64_t p = p0; p < p1; ++p) {
              const std::int64_t* idx = taps.idx.data() + p * TP;
              const C gv = C(gc[p]);
              for (std::int64_t k = 0; k < g.dims; ++k) {
                const C* dw = taps.dw[std::size_t(k)].data() + p * TP;
                C s = 0;
                for (std::int64_t t = 0; t < TP; ++t) s += dw[t] * C(plane[idx[t]]);
                acc[std::size_t((p - p0) * g.dims + k)] += gv * s;
              }
            }
          }
          for (std::int64_t i = 0; i < (p1 - p0) * g.dims; ++i)
            dg[p0 * g.dims + i] = T(acc[std::size_t(i)]);
        }
      });
    }
  }
}

}  // namespace

void add_grid_sample_kernels(KernelTable& table) {
  table.emplace_back(OpId::grid_sample, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "grid_sample", grid_sample_kernel<scalar_t>(c));
  });
  table.emplace_back(OpId::grid_sample_backward, [](DeviceImpl&, const OpCall& c) {
    FERRY_DISPATCH_FLOATING(c.inputs.at(0).dtype, "grid_sample_backward",
                            grid_sample_backward_kernel<scalar_t>(c));
  });
}

}  // namespace ferry::cpu
