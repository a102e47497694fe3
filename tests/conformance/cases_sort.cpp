// tests/conformance/cases_sort.cpp — prod, the scans (cumsum, cumprod, cummax,
// cummin), the sort and the selections made of it (argsort, topk, kthvalue,
// median, mode; ferry/ops_sort.hpp), and the ops made of the sort: scatter,
// scatter_reduce, index_put, masked_select, masked_scatter, nonzero,
// searchsorted, bucketize, unique, repeat_interleave with a count per
// element, rot90 (ferry/ops_shape.hpp): each on every dtype it takes, over odd,
// non-contiguous and long rows (long enough for the Vulkan sort's global
// merge steps and the scan's workgroup-per-line schedule, and for each of the
// CUDA scan's and sort's schedules), in forward and gradient modes. Integer
// inputs hold many ties, which the stable order must break the same way on
// every device.
#include <cmath>

#include "catalog.hpp"

namespace ferry::conformance {
namespace {

using Fn = std::function<Tensor(const Inputs&)>;

struct SortOp {
  const char* op;
  std::string label;
  Shape shape;
  Fn run;
  bool differentiable = true;
  bool products = false;  // values near 1, so that long products stay finite in f32
};

// A (values, indices) result as one f32 tensor (exact: the cases' values and
// positions are small).
Tensor joined(const ValuesIndices& r) {
  return cat({r.values.to(DType::f32).reshape({-1}), r.indices.to(DType::f32).reshape({-1})});
}

// Floating inputs rounded to quarters (many ties) with NaN for the values
// above 2.7; integer inputs as they are (already full of ties).
Tensor ties_and_nan(const Tensor& x) {
  if (!is_floating(x.dtype())) return x;
  return where(gt(x, 2.7), Scalar(NAN), round(x * 4) / 4);
}

// A scan along `dim` of x of `shape`: cumsum, cumprod (values near 1), or cummax / cummin as
// (values, indices), of ties_and_nan(x) with `ties`. `note` says which schedule it reaches.
SortOp scan_case(const char* op, Shape shape, std::int64_t dim, bool ties = false,
                 const char* note = nullptr) {
  std::string label = fmt::format("{} dim={}{}", shape_str(shape), dim, ties ? " ties/NaN" : "");
  if (note) label += fmt::format(" ({})", note);
  const std::string_view name = op;
  if (name == "cumsum")
    return {op, label, shape, [dim](const Inputs& in) { return cumsum(in[0], dim); }};
  if (name == "cumprod")
    return {op, label, shape, [dim](const Inputs& in) { return cumprod(in[0], dim); }, true, true};
  const bool is_max = name == "cummax";
  return {op, label, shape,
          [dim, ties, is_max](const Inputs& in) {
            const Tensor x = ties ? ties_and_nan(in[0]) : in[0];
            return joined(is_max ? cummax(x, dim) : cummin(x, dim));
          },
          false};
}

std::vector<SortOp> sort_ops() {
  return {
      {"prod",
       "[7, 13] dims=[1]",
       {7, 13},
       [](const Inputs& in) { return prod(in[0], {1}); },
       true,
       true},
      {"prod",
       "[3, 5, 7] dims=[0, 2] keepdim",
       {3, 5, 7},
       [](const Inputs& in) {
         return prod(in[0], {0, 2}, true);
       },
       true,
       true},
      {"prod",
       "[13, 7].t() all",
       {13, 7},
       [](const Inputs& in) { return prod(in[0].t()); },
       true,
       true},
      scan_case("cumsum", {5, 13}, 1),
      scan_case("cumsum", {5, 13}, 0),
      {"cumsum",
       "[13, 5].t() dim=-1",
       {13, 5},
       [](const Inputs& in) { return cumsum(in[0].t(), -1); }},
      scan_case("cumsum", {5000}, 0),
      // Long lines: cut into chunks (Note [CUDA scans]). A contiguous line of
      // 3 chunks of 4096 and 17 more (the chunk states scanned by a thread),
      // of 65 chunks and 17 more (by a block), a few long rows, rows scanned
      // whole by a warp each; columns of 64-element chunks (inner > 1).
      scan_case("cumsum", {12305}, 0, false, "3 chunks + 17"),
      scan_case("cumsum", {266257}, 0, false, "65 chunks + 17"),
      scan_case("cumsum", {3, 9000}, 1),
      scan_case("cumsum", {40, 1000}, 1),
      scan_case("cumsum", {300, 7}, 0),
      scan_case("cumsum", {3, 300, 5}, 1),
      scan_case("cumsum", {5000, 3}, 0),
      scan_case("cumprod", {12305}, 0, false, "3 chunks + 17"),
      scan_case("cumprod", {3, 9000}, 1),
      scan_case("cumprod", {300, 7}, 0),
      scan_case("cumprod", {5, 13}, 1),
      scan_case("cumprod", {3, 4, 5}, 1),
      scan_case("cummax", {5, 13}, 1),
      scan_case("cummax", {5, 13}, 0),
      scan_case("cummin", {5000}, 0),
      scan_case("cummax", {12305}, 0, true),
      scan_case("cummin", {266257}, 0, true),
      scan_case("cummax", {3, 9000}, 1, true),
      scan_case("cummin", {40, 1000}, 1),
      scan_case("cummax", {3, 300, 5}, 1, true),
      scan_case("cummin", {5000, 3}, 0, true),
      {"sort",
       "[5, 13] dim=1",
       {5, 13},
       [](const Inputs& in) { return joined(sort(in[0], 1)); },
       false},
      {"sort",
       "[5, 13] dim=0 descending",
       {5, 13},
       [](const Inputs& in) { return joined(sort(in[0], 0, true)); },
       false},
      {"sort",
       "[7, 13].t() dim=-1",
       {7, 13},
       [](const Inputs& in) { return joined(sort(in[0].t(), -1)); },
       false},
      {"sort",
       "[3, 1500] dim=1 descending",
       {3, 1500},
       [](const Inputs& in) { return joined(sort(in[0], 1, true)); },
       false},
      // Rows of 2^15 elements or more: sorted together on CUDA, by key then
      // by row (Note [CUDA sort]).
      // Rows of at most 16: a thread per row on Vulkan (Note [Vulkan sort]).
      {"sort",
       "[500, 11] dim=1 ties/NaN (short rows)",
       {500, 11},
       [](const Inputs& in) { return joined(sort(ties_and_nan(in[0]), 1)); },
       false},
      {"sort",
       "[500, 16] dim=1 descending ties/NaN (short rows)",
       {500, 16},
       [](const Inputs& in) { return joined(sort(ties_and_nan(in[0]), 1, true)); },
       false},
      {"sort",
       "[40000] ties/NaN",
       {40000},
       [](const Inputs& in) { return joined(sort(ties_and_nan(in[0]), 0)); },
       false},
      {"sort",
       "[40000] descending ties/NaN",
       {40000},
       [](const Inputs& in) { return joined(sort(ties_and_nan(in[0]), 0, true)); },
       false},
      {"sort",
       "[3, 40000] dim=1 ties/NaN",
       {3, 40000},
       [](const Inputs& in) { return joined(sort(ties_and_nan(in[0]), 1)); },
       false},
      {"sort",
       "[3, 40000] dim=1 descending ties/NaN",
       {3, 40000},
       [](const Inputs& in) { return joined(sort(ties_and_nan(in[0]), 1, true)); },
       false},
      {"argsort",
       "[40000, 2] dim=0 ties/NaN",
       {40000, 2},
       [](const Inputs& in) { return argsort(ties_and_nan(in[0]), 0); },
       false},
      {"argsort",
       "[5, 13] dim=1 descending",
       {5, 13},
       [](const Inputs& in) { return argsort(in[0], 1, true); },
       false},
      {"topk",
       "[5, 13] k=4 dim=1",
       {5, 13},
       [](const Inputs& in) { return joined(topk(in[0], 4, 1)); },
       false},
      {"topk",
       "[13, 5] k=3 dim=0 smallest",
       {13, 5},
       [](const Inputs& in) { return joined(topk(in[0], 3, 0, false)); },
       false},
      // Rows long enough for the CPU's selection to replace records in its heap; k = n; k = 0.
      {"topk",
       "[3, 5000] k=64 dim=1 ties/NaN",
       {3, 5000},
       [](const Inputs& in) { return joined(topk(ties_and_nan(in[0]), 64, 1)); },
       false},
      {"topk",
       "[5000, 2] k=100 dim=0 smallest ties/NaN",
       {5000, 2},
       [](const Inputs& in) { return joined(topk(ties_and_nan(in[0]), 100, 0, false)); },
       false},
      {"topk",
       "[4, 7] k=7 dim=-1",
       {4, 7},
       [](const Inputs& in) { return joined(topk(in[0], 7, -1)); },
       false},
      {"topk",
       "[4, 7] k=0 dim=1",
       {4, 7},
       [](const Inputs& in) { return joined(topk(in[0], 0, 1)); },
       false},
      {"kthvalue",
       "[5, 13] k=5 dim=1 keepdim",
       {5, 13},
       [](const Inputs& in) { return joined(kthvalue(in[0], 5, 1, true)); },
       false},
      {"median",
       "[5, 13] dim=1",
       {5, 13},
       [](const Inputs& in) { return joined(median(in[0], 1)); },
       false},
      {"median", "[7, 13] all", {7, 13}, [](const Inputs& in) { return median(in[0]); }},
      {"mode",
       "[5, 13] dim=1",
       {5, 13},
       [](const Inputs& in) { return joined(mode(in[0], 1)); },
       false},
  };
}

// Duplicate targets: rows 0 and 2 of dim 0 take several sources.
Tensor scatter_index(const Tensor& like) {
  return ints({0, 2, 2, 4, 0, 2, 1, 2, 0, 0, 3, 2, 2, 4, 2, 0, 1, 4, 4, 2, 0}, like)
      .reshape({3, 7});
}

std::vector<SortOp> scatter_ops() {
  std::vector<SortOp> ops;
  const std::pair<const char*, bool> reductions[] = {
      {"sum", true}, {"prod", false}, {"mean", true}, {"amax", false}, {"amin", true}};
  for (auto [reduce, self] : reductions)
    ops.push_back(
        {"scatter_reduce",
         fmt::format("[5, 7] dim=0 index [3, 7] {}{}", reduce, self ? "" : " exclude self"),
         {5, 7},
         [reduce, self](const Inputs& in) {
           Tensor src = flip(in[0], {0}).narrow(0, 0, 3);
           return scatter_reduce(in[0], 0, scatter_index(in[0]), src, reduce, self);
         },
         true,
         std::string(reduce) == "prod"});
  const auto add = [&](const char* op, std::string label, Shape shape, Fn run, bool diff = true) {
    ops.push_back({op, std::move(label), std::move(shape), std::move(run), diff});
  };
  add("scatter", "[5, 7] dim=1 index [5, 3]", {5, 7}, [](const Inputs& in) {
    Tensor idx = ints({6, 0, 6, 1, 1, 1, 2, 5, 2, 0, 3, 0, 4, 4, 4}, in[0]).reshape({5, 3});
    return scatter(in[0], 1, idx, flip(in[0], {1}));
  });
  for (bool acc : {false, true})
    add("index_put", fmt::format("[6, 4] indices [4]{}", acc ? " accumulate" : ""), {6, 4},
        [acc](const Inputs& in) {
          return index_put(in[0], {ints({0, 2, 5, 2}, in[0])}, flip(in[0], {0}).narrow(0, 0, 4),
                           acc);
        });
  add("masked_select", "[5, 7] mask [7]", {5, 7}, [](const Inputs& in) {
    return masked_select(in[0], gt(ints({0, 1, 1, 0, 1, 0, 1}, in[0]), 0));
  });
  add("masked_scatter", "[5, 7] mask [7]", {5, 7}, [](const Inputs& in) {
    return masked_scatter(in[0], gt(ints({1, 0, 1, 1, 0, 0, 1}, in[0]), 0), flip(in[0], {0, 1}));
  });
  add(
      "nonzero", "[5, 7]", {5, 7}, [](const Inputs& in) { return nonzero(in[0]); }, false);
  add(
      "searchsorted", "[5, 7] rows, values [5, 7]", {5, 7},
      [](const Inputs& in) { return searchsorted(sort(in[0], 1).values, flip(in[0], {1})); },
      false);
  add(
      "bucketize", "[5, 7] boundaries [7] right", {5, 7},
      [](const Inputs& in) { return bucketize(in[0], sort(in[0].select(0, 1)).values, true); },
      false);
  add(
      "unique", "[5, 7]", {5, 7},
      [](const Inputs& in) {
        UniqueResult u = unique(in[0], true, true, true);
        return cat({u.values.to(DType::f32), u.inverse.reshape({-1}).to(DType::f32),
                    u.counts.to(DType::f32)});
      },
      false);
  add("repeat_interleave", "[5, 7] dim=0 repeats [2, 0, 1, 3, 1]", {5, 7}, [](const Inputs& in) {
    return repeat_interleave(in[0], ints({2, 0, 1, 3, 1}, in[0]), 0);
  });
  add("rot90", "[5, 7] k=1", {5, 7}, [](const Inputs& in) { return rot90(in[0]).contiguous(); });
  add("rot90", "[2, 3, 4] k=-1 dims=(1, 2)", {2, 3, 4}, [](const Inputs& in) {
    return rot90(in[0], -1, {1, 2}).contiguous();
  });
  return ops;
}

// The differentiable value of each selection, for the gradient cases.
std::vector<SortOp> sort_grad_ops() {
  std::vector<SortOp> ops;
  for (const SortOp& s : sort_ops())
    if (s.differentiable) ops.push_back(s);
  for (const SortOp& s : scatter_ops())
    if (s.differentiable) ops.push_back(s);
  const auto add = [&](const char* op, std::string label, Shape shape, Fn run) {
    ops.push_back({op, std::move(label), std::move(shape), std::move(run)});
  };
  add("cummax", "[5, 13] dim=1", {5, 13}, [](const Inputs& in) { return cummax(in[0], 1).values; });
  add("cummin", "[5, 13] dim=0", {5, 13}, [](const Inputs& in) { return cummin(in[0], 0).values; });
  add("sort", "[5, 13] dim=0 descending", {5, 13},
      [](const Inputs& in) { return sort(in[0], 0, true).values; });
  add("topk", "[5, 13] k=4 dim=1", {5, 13},
      [](const Inputs& in) { return topk(in[0], 4, 1).values; });
  add("kthvalue", "[5, 13] k=5 dim=1", {5, 13},
      [](const Inputs& in) { return kthvalue(in[0], 5, 1).values; });
  add("median", "[5, 13] dim=1", {5, 13}, [](const Inputs& in) { return median(in[0], 1).values; });
  add("mode", "[5, 13] dim=1", {5, 13}, [](const Inputs& in) { return mode(in[0], 1).values; });
  // Zeros in the slices: the exact gradients PyTorch's formulas give there.
  add("prod", "[6, 5] dims=[1] with zeros", {6, 5},
      [](const Inputs& in) { return prod(in[0] * gt(in[0], 0.8), {1}); });
  add("cumprod", "[6, 5] dim=1 with zeros", {6, 5},
      [](const Inputs& in) { return cumprod(in[0] * gt(in[0], 0.8), 1); });
  return ops;
}

InputSpec spec_of(const SortOp& s, DType dt) {
  if (s.products)
    return is_floating(dt) ? InputSpec{{s.shape}, 0.5, 1.5} : InputSpec{{s.shape}, -2, 2};
  return {{s.shape}};
}

}  // namespace

void add_sort_cases(std::vector<Case>& out) {
  std::vector<SortOp> ops = sort_ops();
  for (SortOp& s : scatter_ops()) ops.push_back(std::move(s));
  for (const SortOp& s : ops) {
    const OpInfo& info = op_info(*op_from_name(s.op));
    for (DType dt : kAll) {
      if (!info.dtypes.has(dt)) continue;
      out.push_back({s.op,
                     dt,
                     s.label,
                     "sort",
                     threshold(dt, s.products ? 1e-10 : 1e-12),
                     inputs_of(spec_of(s, dt), dt),
                     {},
                     s.run});
      hold_to_composition(out.back());  // topk's fused CPU kernel
    }
  }
}

void add_sort_grad_cases(std::vector<Case>& out) {
  for (const SortOp& s : sort_grad_ops())
    for (DType dt : kFloat)
      out.push_back({std::string(s.op) + ".grad",
                     dt,
                     s.label,
                     "sort",
                     threshold(dt, 1e-10),
                     inputs_of(spec_of(s, dt), dt),
                     {},
                     [run = s.run](const Inputs& in) { return gradients_of(run, in); }});
}

}  // namespace ferry::conformance
