// ferry/ops.hpp — the ops, as free functions and operators.
//
// Semantics follow PyTorch: NumPy broadcasting, PyTorch's dtype promotion
// (an int tensor divided by an int tensor is f32; a float scalar makes an int
// tensor f32), NaN propagation in maximum/minimum/max/min. All tensor inputs
// of one op must be on one device (DeviceMismatchError); an op the device
// lacks raises UnsupportedError. Results live on the inputs' device.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/op.hpp"
#include "ferry/ops_conv.hpp"      // convolution, unfold and fold
#include "ferry/ops_inplace.hpp"   // the in-place `_` forms
#include "ferry/ops_linalg.hpp"    // linalg::cholesky, solve, inv, det, slogdet, ...
#include "ferry/ops_math.hpp"      // logaddexp, kron, diff, nansum, bincount, pdist, ...
#include "ferry/ops_pool.hpp"      // pooling
#include "ferry/ops_products.hpp"  // einsum, tensordot, mm, bmm, addmm, ...
#include "ferry/ops_resample.hpp"  // interpolate, pixel_shuffle
#include "ferry/ops_shape.hpp"     // the indexing and shape ops
#include "ferry/ops_sort.hpp"      // scans, sorting and selection
#include "ferry/ops_special.hpp"   // lgamma, digamma, polygamma, mvlgamma
#include "ferry/ops_stats.hpp"     // aminmax, cov, corrcoef, quantile, logcumsumexp, trapezoid
#include "ferry/tensor.hpp"

namespace ferry {

// Unary, element-wise. Floating ops on integer or bool inputs give f32.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor expm1(const Tensor& x);  // exp(x) - 1, accurate near 0
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);  // log(1 + x), accurate near 0
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor erfc(const Tensor& x);    // 1 - erf(x), accurate where erf(x) is near 1
Tensor erfinv(const Tensor& x);  // on [-1, 1]; +-inf at +-1, NaN outside
// Rounding to whole numbers (integer tensors come back as they are): round is
// half to even, as PyTorch's.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor trunc(const Tensor& x);
Tensor round(const Tensor& x);
// x rounded to `decimals` decimal places (negative: to tens, hundreds...), as
// PyTorch: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d; floats only.
Tensor round(const Tensor& x, std::int64_t decimals);
Tensor frac(const Tensor& x);        // x - trunc(x)
Tensor sign(const Tensor& x);        // -1, 0 or 1 (0 for NaN)
Tensor reciprocal(const Tensor& x);  // 1 / x, integers and bool as f32
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor asin(const Tensor& x);
Tensor acos(const Tensor& x);
Tensor atan(const Tensor& x);
Tensor sinh(const Tensor& x);
Tensor cosh(const Tensor& x);
Tensor asinh(const Tensor& x);
Tensor acosh(const Tensor& x);
Tensor atanh(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
// approximate: "none" (the exact erf form) or "tanh".
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor silu(const Tensor& x);
// Activations without parameters; floating inputs only, as PyTorch's.
Tensor selu(const Tensor& x);
Tensor hardsigmoid(const Tensor& x);  // relu6(x + 3) / 6
Tensor hardswish(const Tensor& x);    // x relu6(x + 3) / 6
Tensor mish(const Tensor& x);         // x tanh(softplus(x))
Tensor logsigmoid(const Tensor& x);   // log(sigmoid(x)), without overflow

// Tests of each element -> bool, for every dtype (integers are finite).
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
Tensor logical_not(const Tensor& x);  // x == 0
Tensor bitwise_not(const Tensor& x);  // ~x; integers and bool only

// Composite ops (Note [Composite ops] in ferry/op.hpp): made of the ops above
// on every device, and differentiable through them.
// x * x; a bool x counts as i64 (PyTorch's pow(x, 2)).
Tensor square(const Tensor& x);
// min(max(x, min), max), either bound optional (not both); the result's dtype
// is x's promoted with the bounds' (an integer x with a float bound gives a
// float), as in PyTorch; min > max gives max. The gradient goes to x where
// min <= x <= max, else to the bound taken. A bool result is refused.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
// Tensor bounds broadcast with x; an undefined Tensor is no bound.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max = {});
Tensor clamp_min(const Tensor& x, const Scalar& min);
Tensor clamp_max(const Tensor& x, const Scalar& max);
// clip is clamp's other name, as in PyTorch.
Tensor clip(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clip(const Tensor& x, const Tensor& min, const Tensor& max = {});
// Activations with parameters, PyTorch's defaults and gradients (floating
// inputs; hardtanh and relu6 also take integers, whose bounds are truncated
// to the dtype, as PyTorch's).
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
Tensor elu(const Tensor& x, double alpha = 1);   // x > 0 ? x : alpha (exp(x) - 1)
Tensor celu(const Tensor& x, double alpha = 1);  // x > 0 ? x : alpha (exp(x / alpha) - 1)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
// clamp(x, min_val, max_val), with a zero gradient at the bounds themselves.
Tensor hardtanh(const Tensor& x, double min_val = -1, double max_val = 1);
Tensor relu6(const Tensor& x);  // hardtanh(x, 0, 6)
// NaN -> nan, +inf -> posinf, -inf -> neginf (by default the dtype's largest
// and lowest finite values); integers and bool come back as they are.
Tensor nan_to_num(const Tensor& x, double nan = 0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);

// Binary, element-wise, broadcasting.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Scalar& b);
Tensor sub(const Tensor& a, const Scalar& b);
Tensor sub(const Scalar& a, const Tensor& b);
Tensor mul(const Tensor& a, const Scalar& b);
Tensor div(const Tensor& a, const Scalar& b);
Tensor div(const Scalar& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& b);
Tensor pow(const Scalar& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Scalar& b);
Tensor minimum(const Tensor& a, const Scalar& b);
// atan2(a, b): the angle of the point (b, a); integers and bool give f32.
Tensor atan2(const Tensor& a, const Tensor& b);
Tensor atan2(const Tensor& a, const Scalar& b);
// Division with rounding, PyTorch's: remainder has b's sign (Python's %),
// fmod a's (C's), floor_divide rounds the quotient down. An integer divisor
// of 0 is a ValueError (PyTorch's ZeroDivisionError); a float one gives NaN
// or infinity.
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, const Scalar& b);
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, const Scalar& b);
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, const Scalar& b);
Tensor hypot(const Tensor& a, const Tensor& b);  // sqrt(a^2 + b^2) without overflow; floats
Tensor hypot(const Tensor& a, const Scalar& b);
Tensor copysign(const Tensor& a, const Tensor& b);  // |a| with b's sign bit
Tensor copysign(const Tensor& a, const Scalar& b);
Tensor xlogy(const Tensor& a, const Tensor& b);  // a log(b), 0 where a is 0 (b not NaN)
Tensor xlogy(const Tensor& a, const Scalar& b);
// Bitwise ops on integers and bool; the shifts on integers, a count outside
// [0, bits) giving 0 (left) or the sign (right).
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, const Scalar& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Scalar& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Scalar& b);
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_left_shift(const Tensor& a, const Scalar& b);
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, const Scalar& b);
// Truth of each element (nonzero) combined -> bool, for every dtype.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);

// Ternary, element-wise, broadcasting (composite ops).
// a + weight (b - a), PyTorch's form (from b's side for weight >= 1/2);
// floats only.
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight);
Tensor lerp(const Tensor& a, const Tensor& b, const Scalar& weight);
Tensor addcmul(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor addcdiv(const Tensor& x, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
// |a - b| <= atol + rtol |b| element-wise (equal infinities are close; NaNs
// only with equal_nan) -> bool; allclose: all of it, as a bool on the host.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
// The same shape and the same values (NaN is unequal to itself), on the host.
bool equal(const Tensor& a, const Tensor& b);

// Comparisons -> bool.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Scalar& b);
Tensor ne(const Tensor& a, const Scalar& b);
Tensor lt(const Tensor& a, const Scalar& b);
Tensor le(const Tensor& a, const Scalar& b);
Tensor gt(const Tensor& a, const Scalar& b);
Tensor ge(const Tensor& a, const Scalar& b);

// cond ? a : b, broadcasting all three; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b);

// Note [Type promotion]
// PyTorch's torch.result_type for two operands of an element-wise op: the
// categories are bool < integer < floating. Operands with dims promote with
// each other by promote_types. A 0-d tensor beside a tensor with dims counts
// like a Python number: only when its category is higher, and then with its
// own dtype (f16[2] + f32 0-d -> f16, i32[2] + i64 0-d -> i32, i32[2] + f64
// 0-d -> f64). A Scalar counts as f32, i64 or bool (its natural dtype) the
// same way. Two 0-d tensors promote like tensors with dims. Binary ops,
// comparisons and where promote by this rule on every device.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& t, const Scalar& s);

// An element-wise op by its id in the op table (ferry/op.hpp): unary_op
// takes a unary row (neg(x) is unary_op(OpId::neg, x)), binary_op a binary or
// compare row. For code that walks the table, such as the conformance suite.
Tensor unary_op(OpId op, const Tensor& x);
Tensor binary_op(OpId op, const Tensor& a, const Tensor& b);

// Conversion (same as x.to(dtype)). Float -> int truncates toward zero.
Tensor cast(const Tensor& x, DType dtype);

// Reductions. `dims` empty means every dim. Integer and bool sums are i64;
// mean and var need a floating input. var uses Bessel's correction by default.
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor var(const Tensor& x, const std::vector<std::int64_t>& dims = {}, double correction = 1,
           bool keepdim = false);
// The product over dims; integer and bool inputs give i64 (wrapping), an
// empty slice gives 1. The gradient is exact where x holds zeros.
Tensor prod(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// log(sum(exp(x))) over `dims` (empty: every dim), computed without overflow;
// integer and bool inputs give f32. An empty slice gives -inf.
Tensor logsumexp(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// i64 index of the first maximum (NaN counts as the maximum); over the
// flattened tensor when dim is not given.
Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt,
              bool keepdim = false);
// The same for the first minimum (NaN counts as the minimum).
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim = std::nullopt,
              bool keepdim = false);
// PyTorch's amax and amin are max and min over dims (the gradient shared by ties).
Tensor amax(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// Whether every / some element is nonzero (NaN is) -> bool; over nothing, true / false.
Tensor all(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor count_nonzero(const Tensor& x, const std::vector<std::int64_t>& dims = {});  // i64
// sqrt(var); and var or std with the mean, as PyTorch's var_mean and std_mean.
Tensor std(const Tensor& x, const std::vector<std::int64_t>& dims = {}, double correction = 1,
           bool keepdim = false);
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const std::vector<std::int64_t>& dims = {},
                                   double correction = 1, bool keepdim = false);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const std::vector<std::int64_t>& dims = {},
                                   double correction = 1, bool keepdim = false);
// The vector p-norm over dims (empty: every element), PyTorch's norm and
// linalg.vector_norm: p = 2 (the default), 1, inf, -inf, 0 (the count of
// nonzeros) or any other number; "fro" is 2. Floats only. The gradient at a
// zero norm is 0, as PyTorch's.
Tensor norm(const Tensor& x, double p = 2, const std::vector<std::int64_t>& dims = {},
            bool keepdim = false);
Tensor norm(const Tensor& x, std::string_view p, const std::vector<std::int64_t>& dims = {},
            bool keepdim = false);

// Matrix product, PyTorch's matmul: 1-D, 2-D, and batched with broadcast batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);

// torch.cdist: the p-norm distance between every row of x1 [..., P, M] and every row of x2
// [..., R, M] (batch dims broadcast) -> [..., P, R]; p >= 0 (ValueError otherwise), inf too.
// compute_mode as PyTorch's: for p = 2, "use_mm_for_euclid_dist_if_necessary" (the default)
// takes the matrix-product form |a|^2 + |b|^2 - 2 a.b (clamped at 0) when P or R exceeds 25,
// "use_mm_for_euclid_dist" always, "donot_use_mm_for_euclid_dist" never; every other p is the
// norm of the differences. The gradient at a zero distance is 0, as PyTorch's.
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2,
             std::string_view compute_mode = "use_mm_for_euclid_dist_if_necessary");

// Note [TF32]
// Ampere and later NVIDIA GPUs can run f32 matrix products on tensor cores in
// TF32: the inputs are rounded to 10 mantissa bits (f32 keeps 23), so results
// carry about 1e-3 relative error, for several times the throughput. Like
// PyTorch since 1.12 (torch.backends.cuda.matmul.allow_tf32), ferry leaves it
// off: an f32 matmul computes in f32 unless the program opts in, with
// set_matmul_allow_tf32(true) or FERRY_ALLOW_TF32=1 in the environment (read
// once, at the first query). Vulkan's cooperative-matrix path takes it as
// leave to run f32 products as three bf16 ones (about 1e-5 relative error: Note
// [f32 products on cooperative matrices] in runtime/vulkan/vk_kernels_coopmat.cpp);
// other backends without TF32 ignore the switch. 16-bit and f64 products are
// unaffected. Thread-safe; it applies to matmuls issued
// after it.
FERRY_EXPORT void set_matmul_allow_tf32(bool allow);
FERRY_EXPORT bool matmul_allow_tf32();

Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);
// Normalises over the last normalized_shape.size() dims; weight and bias are
// optional (undefined Tensor).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// weight[indices]: indices i32 or i64 of any shape -> indices.shape + [dim]. The row
// padding_idx (negative counts from the end, as PyTorch's) gets no gradient: F.embedding's
// padding_idx, a padding token's row that training leaves as it is. scale_grad_by_freq
// divides each lookup's gradient by how often its index occurs in `indices` (padding lookups
// count, as in PyTorch), so frequent tokens do not dominate a row's update.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<std::int64_t> padding_idx = std::nullopt,
                 bool scale_grad_by_freq = false);
// torch.embedding_renorm_: every row of weight [num, dim] that `indices` names and whose
// norm_type-norm exceeds max_norm is scaled, in place and untracked by autograd, by
// max_norm / (norm + 1e-7); the others are left as they are. F.embedding's max_norm runs it
// before the lookup. ValueError unless max_norm >= 0 and norm_type > 0.
Tensor& embedding_renorm_(Tensor& weight, const Tensor& indices, double max_norm,
                          double norm_type = 2);
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim = 0);

// Operators.
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);

// The shape two shapes broadcast to; ShapeError when they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace ferry
