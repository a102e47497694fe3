// ferry/ops_products.hpp — products of tensors beyond matmul, with PyTorch's names, shapes,
// dtypes and errors: einsum, tensordot, outer, dot, vdot, vecdot, cross, multi_dot, the
// checked matrix forms mm, bmm and mv, and the fused-looking addmm, addmv, addbmm, baddbmm and
// addr. Included by ferry/ops.hpp.
//
// Note [Products as matmul]
// Every product here is composed of ops, so it runs and differentiates on every device.
// einsum reduces an equation to one batched matrix product per pair of operands, left to
// right, as PyTorch's sumproduct_pair: each operand's dims are laid out in one label order
// (the output's labels first, then those summed), a label repeated within an operand taking
// its diagonal; then for each pair the labels both keep become the batch, those only one keeps
// its rows or columns, and those summed (once no later operand has them) the inner dim of a
// matmul, a label of size 1 on one side broadcasting; a label in one operand alone is summed
// before the product. tensordot is one such product; mm, bmm and mv are matmul with their
// stricter shape checks (so they share its kernels and autocast row); dot, outer and the add*
// forms have rows of their own, for PyTorch's autocast policy.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry {

// torch.einsum: the operands' dims named by the equation's letters ("bhqd,bhkd->bhqk"; "..."
// for any number of leading or inner dims, broadcast across operands; without "->", the
// output is the letters used once, in alphabetical order, after the ellipsis dims). Letters
// in the output are kept, the others summed; a letter repeated within an operand takes its
// diagonal. A label's sizes must match or be 1 (broadcast). ValueError for a malformed
// equation, ShapeError for operands that do not fit it.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

// torch.tensordot: the sum over a's last `dims` dims times b's first `dims` dims; or over the
// pairs (dims_a[i], dims_b[i]). The result's dims are a's free dims, then b's.
Tensor tensordot(const Tensor& a, const Tensor& b, std::int64_t dims = 2);
Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<std::int64_t>& dims_a,
                 const std::vector<std::int64_t>& dims_b);

// torch.outer: a [n] and b [m] -> [n, m], a[i] · b[j].
Tensor outer(const Tensor& a, const Tensor& b);
// torch.dot: the inner product of two 1-D tensors of one dtype and length -> a 0-d tensor.
// torch.vdot: the same for real tensors (ferry has no complex dtypes), with its own row for
// PyTorch's autocast policy.
Tensor dot(const Tensor& a, const Tensor& b);
Tensor vdot(const Tensor& a, const Tensor& b);
// torch.linalg.vecdot: sum(x * y) over `dim` of the broadcast operands (one dtype).
Tensor vecdot(const Tensor& x, const Tensor& y, std::int64_t dim = -1);
// torch.cross: the cross product of 3-vectors along `dim` (unset: the first dim of size 3),
// a and b of one rank and broadcast against each other; linalg_cross is torch.linalg.cross
// (dim -1 by default). ShapeError unless that dim has size 3 in both.
Tensor cross(const Tensor& a, const Tensor& b, std::optional<std::int64_t> dim = std::nullopt);
Tensor linalg_cross(const Tensor& a, const Tensor& b, std::int64_t dim = -1);
// torch.linalg.multi_dot: the product of a chain of matrices (the first may be a row vector
// [n] and the last a column vector [n], dropped from the result), multiplied in the cheapest
// order (Note [The order of a chain of products] in runtime/ops_products.cpp). One dtype, at
// least two tensors. torch.chain_matmul: the same for one or more 2-D matrices.
Tensor multi_dot(const std::vector<Tensor>& tensors);
Tensor chain_matmul(const std::vector<Tensor>& matrices);

// torch.mm [n, k] x [k, m], torch.bmm [b, n, k] x [b, k, m] (no broadcasting), torch.mv
// [n, k] x [k]: matmul, with their shape checks.
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor mv(const Tensor& a, const Tensor& v);

// beta · input + alpha · product, input broadcast to the product's shape; with beta 0, input
// is not read (NaN and inf in it do not spread), as PyTorch's.
//   addmm    m1 [n, k] x m2 [k, m]
//   addmv    mat [n, k] x vec [k]
//   baddbmm  b1 [b, n, k] x b2 [b, k, m], per batch
//   addbmm   the sum over the batch of b1 x b2 -> [n, m]
//   addr     the outer product of vec1 [n] and vec2 [m] -> [n, m]
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, double beta = 1,
             double alpha = 1);
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, double beta = 1,
             double alpha = 1);
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta = 1,
               double alpha = 1);
Tensor addbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, double beta = 1,
              double alpha = 1);
Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, double beta = 1,
            double alpha = 1);

}  // namespace ferry
