// runtime/ops_products.cpp — einsum, tensordot and the named matrix products as matmul
// (ferry/ops_products.hpp, Note [Products as matmul]).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "autocast_internal.hpp"
#include "dispatch.hpp"
#include "ferry/error.hpp"
#include "ferry/ops.hpp"
#include "ops_internal.hpp"

namespace ferry {
namespace {

using detail::check_defined;
using detail::wrap_dim;

// A label: a letter's index (0-51: a-z then A-Z), or kEllipsis + i for the ellipsis's dim i.
constexpr int kLetters = 52, kEllipsis = 1000;

int letter(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

char letter_char(int l) { return char(l < 26 ? 'a' + l : 'A' + (l - 26)); }

// One side of the equation's terms: per term its letters, the ellipsis standing as -1.
struct Term {
  std::vector<int> labels;
  bool ellipsis = false;
};

Term parse_term(std::string_view eq, std::string_view term) {
  Term t;
  for (std::size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (term.substr(i, 3) != "..." || t.ellipsis)
        throw ValueError(
            fmt::format("einsum(): '{}': an ellipsis is three dots, at most once per term", eq));
      t.ellipsis = true, t.labels.push_back(-1), i += 2;
      continue;
    }
    const int l = letter(c);
    if (l < 0)
      throw ValueError(fmt::format(
          "einsum(): invalid subscript '{}' in '{}': subscripts are letters a-z and A-Z", c, eq));
    t.labels.push_back(l);
  }
  return t;
}

// `x` with its dims named by `t` laid out in `order` (the global labels): the ellipsis's dims
// right-aligned to `ell` dims (kEllipsis + i), a repeated label's diagonal taken, missing
// labels as size-1 dims. Returns the aligned tensor, of order.size() dims.
Tensor align(std::string_view eq, std::size_t k, Tensor x, const Term& t, std::int64_t ell,
             const std::vector<int>& order) {
  std::vector<int> names;
  const std::int64_t letters = std::int64_t(t.labels.size()) - (t.ellipsis ? 1 : 0);
  const std::int64_t covered = x.dim() - letters;
  if (t.ellipsis ? covered < 0 : covered != 0)
    throw ShapeError(fmt::format(
        "einsum(): the subscripts of operand {} in '{}' name {} dims, but it has {} (shape {})", k,
        eq, letters, x.dim(), shape_str(x.sizes())));
  for (int l : t.labels) {
    if (l >= 0) {
      names.push_back(l);
      continue;
    }
    for (std::int64_t i = 0; i < covered; ++i) names.push_back(int(kEllipsis + ell - covered + i));
  }
  // Repeated labels: the diagonal of each pair, appended as the last dim.
  for (bool again = true; again;) {
    again = false;
    for (std::size_t p = 0; p < names.size() && !again; ++p)
      for (std::size_t q = p + 1; q < names.size() && !again; ++q) {
        if (names[p] != names[q]) continue;
        if (x.size(std::int64_t(p)) != x.size(std::int64_t(q)))
          throw ShapeError(fmt::format(
              "einsum(): subscript '{}' is repeated in operand {} of '{}' for dims of sizes {} "
              "and {}; a repeated subscript takes a diagonal of equal sizes",
              letter_char(names[p]), k, eq, x.size(std::int64_t(p)), x.size(std::int64_t(q))));
        x = diagonal(x, 0, std::int64_t(p), std::int64_t(q));
        const int l = names[p];
        names.erase(names.begin() + std::ptrdiff_t(q));
        names.erase(names.begin() + std::ptrdiff_t(p));
        names.push_back(l);
        again = true;
      }
  }
  Shape perm, shape;
  for (int l : order) {
    const auto at = std::find(names.begin(), names.end(), l);
    if (at == names.end()) {
      shape.push_back(1);
    } else {
      perm.push_back(std::int64_t(at - names.begin()));
      shape.push_back(x.size(perm.back()));
    }
  }
  return x.permute(perm).reshape(shape);
}

// The sum over `sum` (dims of both, of equal rank) of a · b, keeping every dim (summed ones
// as size 1): one matmul, as PyTorch's sumproduct_pair.
Tensor sum_product(std::string_view eq, Tensor a, Tensor b, const std::vector<bool>& sum) {
  const std::int64_t n = a.dim();
  std::vector<std::int64_t> batch, left, right, inner, a_only, b_only;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t sa = a.size(i), sb = b.size(i);
    if (sa != sb && sa != 1 && sb != 1)
      throw ShapeError(fmt::format(
          "einsum(): '{}': a subscript names dims of sizes {} and {}, which do not broadcast", eq,
          sa, sb));
    if (sum[std::size_t(i)]) {
      if (sa > 1 && sb > 1)
        inner.push_back(i);
      else if (sa > 1)
        a_only.push_back(i);
      else if (sb > 1)
        b_only.push_back(i);
    } else if (sa > 1 && sb > 1) {
      batch.push_back(i);
    } else if (sa > 1) {
      left.push_back(i);
    } else if (sb > 1) {
      right.push_back(i);
    }
  }
  if (!a_only.empty()) a = ferry::sum(a, a_only, true);
  if (!b_only.empty()) b = ferry::sum(b, b_only, true);
  const auto size_of = [](const Tensor& t, const std::vector<std::int64_t>& dims) {
    std::int64_t s = 1;
    for (std::int64_t d : dims) s *= t.size(d);
    return s;
  };
  const auto joined = [](std::initializer_list<const std::vector<std::int64_t>*> parts) {
    Shape out;
    for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
    return out;
  };
  // The size-1 dims of both, in place, so the permutations below cover every dim.
  std::vector<std::int64_t> ones;
  for (std::int64_t i = 0; i < n; ++i)
    if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
        std::find(left.begin(), left.end(), i) == left.end() &&
        std::find(right.begin(), right.end(), i) == right.end() &&
        std::find(inner.begin(), inner.end(), i) == inner.end())
      ones.push_back(i);
  const std::int64_t B = size_of(a, batch), L = size_of(a, left), R = size_of(b, right),
                     K = size_of(a, inner);
  const Tensor am = a.permute(joined({&batch, &left, &inner, &right, &ones})).reshape({B, L, K});
  const Tensor bm = b.permute(joined({&batch, &inner, &right, &left, &ones})).reshape({B, K, R});
  Shape split;
  for (std::int64_t d : batch) split.push_back(a.size(d));
  for (std::int64_t d : left) split.push_back(a.size(d));
  for (std::int64_t d : right) split.push_back(b.size(d));
  for (std::size_t i = 0; i < inner.size() + ones.size(); ++i) split.push_back(1);
  const Shape order = joined({&batch, &left, &right, &inner, &ones});
  Shape back(std::size_t(n), 0);
  for (std::size_t i = 0; i < order.size(); ++i) back[std::size_t(order[i])] = std::int64_t(i);
  return matmul(am, bm).reshape(split).permute(back);
}

void check_rank(std::string_view op, const Tensor& t, std::int64_t rank, const char* what) {
  if (t.dim() != rank)
    throw ShapeError(fmt::format("{}: {} must be a {}-D tensor, got shape {}", op, what, rank,
                                 shape_str(t.sizes())));
}

// beta · input + alpha · product (input not read when beta is 0).
Tensor add_scaled(std::string_view op, const Tensor& input, const Tensor& product, double beta,
                  double alpha) {
  if (!input.defined()) throw Error(fmt::format("{}: the input is undefined", op));
  const Shape shape = broadcast_shapes(input.sizes(), product.sizes());
  if (shape != product.sizes())
    throw ShapeError(fmt::format("{}: the input of shape {} does not broadcast to the product's {}",
                                 op, shape_str(input.sizes()), shape_str(product.sizes())));
  const Tensor scaled = alpha == 1 ? product : product * alpha;
  if (beta == 0) return scaled;
  return (beta == 1 ? input : input * beta) + scaled;
}

}  // namespace

Tensor einsum(std::string_view eq, const std::vector<Tensor>& operands) {
  if (!operands.empty() && ferry::detail::autocast_applies(OpId::einsum)) {
    // The row's policy is the scope's low dtype, whatever the operands: one decides.
    const ferry::detail::AutocastOp ac(OpId::einsum, {&operands[0]});
    std::vector<Tensor> cast;
    for (const Tensor& t : operands) cast.push_back(ac(t));
    return einsum(eq, cast);
  }
  if (operands.empty()) throw ValueError("einsum(): must provide at least one operand");
  for (const Tensor& t : operands)
    if (!t.defined()) throw Error("einsum(): an operand is undefined");
  const std::size_t arrow = eq.find("->");
  if (arrow != std::string_view::npos && eq.find("->", arrow + 2) != std::string_view::npos)
    throw ValueError(fmt::format("einsum(): '{}' has more than one '->'", eq));
  const std::string_view lhs = eq.substr(0, arrow);
  std::vector<Term> terms;
  for (std::size_t at = 0;;) {
    const std::size_t comma = lhs.find(',', at);
    terms.push_back(
        parse_term(eq, lhs.substr(at, comma == std::string_view::npos ? lhs.npos : comma - at)));
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  if (terms.size() != operands.size())
    throw ValueError(fmt::format("einsum(): '{}' has {} operand terms, but {} operands were given",
                                 eq, terms.size(), operands.size()));
  // The ellipsis's dims: the most any operand's ellipsis covers.
  std::int64_t ell = 0;
  std::array<int, kLetters> count{};
  for (std::size_t k = 0; k < terms.size(); ++k) {
    std::int64_t letters = 0;
    for (int l : terms[k].labels)
      if (l >= 0) ++count[std::size_t(l)], ++letters;
    if (terms[k].ellipsis) ell = std::max(ell, operands[k].dim() - letters);
  }
  // The output's labels: as written, or the letters used once, alphabetically, after the
  // ellipsis's dims.
  std::vector<int> out;
  if (arrow != std::string_view::npos) {
    const Term o = parse_term(eq, eq.substr(arrow + 2));
    for (int l : o.labels) {
      if (l < 0) {
        for (std::int64_t i = 0; i < ell; ++i) out.push_back(int(kEllipsis + i));
        continue;
      }
      if (count[std::size_t(l)] == 0)
        throw ValueError(fmt::format(
            "einsum(): output subscript '{}' of '{}' does not appear in the operands' subscripts",
            letter_char(l), eq));
      if (std::find(out.begin(), out.end(), l) != out.end())
        throw ValueError(fmt::format(
            "einsum(): output subscript '{}' of '{}' appears more than once", letter_char(l), eq));
      out.push_back(l);
    }
  } else {
    for (std::int64_t i = 0; i < ell; ++i) out.push_back(int(kEllipsis + i));
    for (int l = 0; l < kLetters; ++l)
      if (count[std::size_t(l)] == 1) out.push_back(l);
  }
  // Every label, the output's first; a term without an ellipsis while others have one keeps its
  // own dims (the ellipsis's dims broadcast against size 1).
  std::vector<int> order = out;
  for (std::int64_t i = 0; i < ell; ++i)
    if (std::find(order.begin(), order.end(), int(kEllipsis + i)) == order.end())
      order.push_back(int(kEllipsis + i));
  for (int l = 0; l < kLetters; ++l)
    if (count[std::size_t(l)] > 0 && std::find(order.begin(), order.end(), l) == order.end())
      order.push_back(l);
  std::vector<Tensor> aligned;
  for (std::size_t k = 0; k < operands.size(); ++k)
    aligned.push_back(align(eq, k, operands[k], terms[k], ell, order));
  // Left to right: a label not in the output is summed in the product after which no operand
  // has it.
  const std::size_t kept = out.size(), n = order.size();
  std::vector<std::size_t> last(n, 0);
  for (std::size_t k = 0; k < aligned.size(); ++k)
    for (std::size_t i = kept; i < n; ++i)
      if (aligned[k].size(std::int64_t(i)) > 1 ||
          std::find(terms[k].labels.begin(), terms[k].labels.end(), order[i]) !=
              terms[k].labels.end())
        last[i] = k;
  Tensor result = aligned[0];
  for (std::size_t k = 1; k < aligned.size(); ++k) {
    std::vector<bool> sum(n, false);
    for (std::size_t i = kept; i < n; ++i) sum[i] = last[i] <= k;
    result = sum_product(eq, result, aligned[k], sum);
  }
  std::vector<std::int64_t> rest;
  for (std::size_t i = kept; i < n; ++i) rest.push_back(std::int64_t(i));
  if (!rest.empty()) result = ferry::sum(result, rest);
  // Labels of size 1 everywhere broadcast to the output as size 1, as PyTorch's.
  return result;
}

Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<std::int64_t>& dims_a,
                 const std::vector<std::int64_t>& dims_b) {
  check_defined("tensordot", {&a, &b});
  if (dims_a.size() != dims_b.size())
    throw ShapeError(
        fmt::format("tensordot: both dimension lists must have the same length, got "
                    "[{}] and [{}]",
                    fmt::join(dims_a, ", "), fmt::join(dims_b, ", ")));
  std::vector<std::int64_t> ca, cb;
  for (std::size_t i = 0; i < dims_a.size(); ++i) {
    ca.push_back(wrap_dim(dims_a[i], a.dim(), "tensordot"));
    cb.push_back(wrap_dim(dims_b[i], b.dim(), "tensordot"));
    if (a.size(ca.back()) != b.size(cb.back()))
      throw ShapeError(fmt::format(
          "tensordot: contracted dimensions need to match, but first has size {} in dim {} and "
          "second has size {} in dim {}",
          a.size(ca.back()), ca.back(), b.size(cb.back()), cb.back()));
  }
  Shape pa, pb, out;
  std::int64_t m = 1, k = 1, nn = 1;
  for (std::int64_t d = 0; d < a.dim(); ++d)
    if (std::find(ca.begin(), ca.end(), d) == ca.end())
      pa.push_back(d), out.push_back(a.size(d)), m *= a.size(d);
  for (std::int64_t d : ca) pa.push_back(d), k *= a.size(d);
  for (std::int64_t d : cb) pb.push_back(d);
  for (std::int64_t d = 0; d < b.dim(); ++d)
    if (std::find(cb.begin(), cb.end(), d) == cb.end())
      pb.push_back(d), out.push_back(b.size(d)), nn *= b.size(d);
  if (ferry::detail::autocast_applies(OpId::tensordot)) {
    const ferry::detail::AutocastOp ac(OpId::tensordot, {&a, &b});
    return matmul(ac(a).permute(pa).reshape({m, k}), ac(b).permute(pb).reshape({k, nn}))
        .reshape(out);
  }
  return matmul(a.permute(pa).reshape({m, k}), b.permute(pb).reshape({k, nn})).reshape(out);
}

Tensor tensordot(const Tensor& a, const Tensor& b, std::int64_t dims) {
  check_defined("tensordot", {&a, &b});
  if (dims < 0 || dims > a.dim() || dims > b.dim())
    throw ShapeError(
        fmt::format("tensordot: dims must be between 0 and the operands' ranks ({} and {}), got {}",
                    a.dim(), b.dim(), dims));
  std::vector<std::int64_t> da, db;
  for (std::int64_t i = 0; i < dims; ++i) da.push_back(a.dim() - dims + i), db.push_back(i);
  return tensordot(a, b, da, db);
}

Tensor outer(const Tensor& a, const Tensor& b) {
  check_defined("outer", {&a, &b});
  check_rank("outer", a, 1, "the first operand");
  check_rank("outer", b, 1, "the second operand");
  return a.reshape({a.size(0), 1}) * b.reshape({1, b.size(0)});
}

namespace {

// dot and vdot (the same for real tensors): their row's autocast, PyTorch's checks, matmul.
Tensor inner_product(OpId op, const Tensor& a, const Tensor& b) {
  const std::string_view name = op_name(op);
  check_defined(name, {&a, &b});
  if (ferry::detail::autocast_applies(op)) {
    const ferry::detail::AutocastOp ac(op, {&a, &b});
    return inner_product(op, ac(a), ac(b));
  }
  check_rank(name, a, 1, "the first operand");
  check_rank(name, b, 1, "the second operand");
  if (a.dtype() != b.dtype())
    throw DTypeError(
        fmt::format("{}: expected both vectors to have same dtype, but found {} and {}", name,
                    dtype_name(a.dtype()), dtype_name(b.dtype())));
  if (a.size(0) != b.size(0))
    throw ShapeError(fmt::format(
        "{}: inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number "
        "of elements",
        name, a.size(0), b.size(0)));
  return matmul(a, b);
}

}  // namespace

Tensor dot(const Tensor& a, const Tensor& b) { return inner_product(OpId::dot, a, b); }
Tensor vdot(const Tensor& a, const Tensor& b) { return inner_product(OpId::vdot, a, b); }

Tensor vecdot(const Tensor& x, const Tensor& y, std::int64_t dim) {
  check_defined("vecdot", {&x, &y});
  if (ferry::detail::autocast_applies(OpId::vecdot)) {
    const ferry::detail::AutocastOp ac(OpId::vecdot, {&x, &y});
    return vecdot(ac(x), ac(y), dim);
  }
  if (x.dtype() != y.dtype())
    throw DTypeError(
        fmt::format("linalg.vecdot: Expected x and y to have the same dtype, but "
                    "found x of type {} and y of type {} instead",
                    dtype_name(x.dtype()), dtype_name(y.dtype())));
  const Tensor xy = x * y;  // broadcast: a ShapeError names both shapes
  return ferry::sum(xy, {wrap_dim(dim, xy.dim(), "linalg.vecdot")});
}

Tensor cross(const Tensor& a, const Tensor& b, std::optional<std::int64_t> dim) {
  check_defined("cross", {&a, &b});
  if (ferry::detail::autocast_applies(OpId::cross)) {
    const ferry::detail::AutocastOp ac(OpId::cross, {&a, &b});
    return cross(ac(a), ac(b), dim);
  }
  if (a.dim() != b.dim())
    throw ShapeError(
        fmt::format("linalg.cross: inputs must have the same number of dimensions, got {} and {}",
                    shape_str(a.sizes()), shape_str(b.sizes())));
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes());
  std::int64_t d = 0;
  if (dim) {
    d = wrap_dim(*dim, std::int64_t(shape.size()), "linalg.cross");
  } else {  // torch.cross's default: the first dim of size 3
    while (d < std::int64_t(shape.size()) && a.size(d) != 3) ++d;
    if (d == std::int64_t(shape.size()))
      throw ShapeError(
          fmt::format("cross: no dimension of size 3 in input {}", shape_str(a.sizes())));
  }
  if (a.size(d) != 3 || b.size(d) != 3)
    throw ShapeError(
        fmt::format("linalg.cross: inputs dimension {} must have length 3, got {} and {}", d,
                    shape_str(a.sizes()), shape_str(b.sizes())));
  const Tensor x = a.expand(shape), y = b.expand(shape);
  const auto at = [&](const Tensor& t, std::int64_t i) { return t.narrow(d, i, 1); };
  return cat({at(x, 1) * at(y, 2) - at(x, 2) * at(y, 1), at(x, 2) * at(y, 0) - at(x, 0) * at(y, 2),
              at(x, 0) * at(y, 1) - at(x, 1) * at(y, 0)},
             d);
}

Tensor linalg_cross(const Tensor& a, const Tensor& b, std::int64_t dim) { return cross(a, b, dim); }

// Note [The order of a chain of products]
// multi_dot multiplies in the order that costs the fewest multiply-adds, found by the textbook
// dynamic program over the chain's sizes (O(n^3) in the number of matrices, nothing beside a
// product), as torch.linalg.multi_dot: [1000, 2] x [2, 1000] x [1000, 2] costs 4 million
// multiply-adds left to right and 8 thousand right to left.
Tensor multi_dot(const std::vector<Tensor>& tensors) {
  const std::size_t n = tensors.size();
  if (n < 2)
    throw ValueError(fmt::format("multi_dot(): expected at least 2 tensors but got {}", n));
  for (const Tensor& t : tensors)
    if (!t.defined()) throw Error("multi_dot(): a tensor is undefined");
  if (ferry::detail::autocast_applies(OpId::multi_dot)) {
    const ferry::detail::AutocastOp ac(OpId::multi_dot, {&tensors[0]});
    std::vector<Tensor> cast;
    for (const Tensor& t : tensors) cast.push_back(ac(t));
    return multi_dot(cast);
  }
  std::vector<Tensor> m(tensors);
  const bool first_vector = m.front().dim() == 1, last_vector = m.back().dim() == 1;
  if (first_vector) m.front() = m.front().unsqueeze(0);
  if (last_vector) m.back() = m.back().unsqueeze(1);
  for (std::size_t i = 0; i < n; ++i) {
    if (m[i].dim() != 2)
      throw ShapeError(fmt::format("multi_dot(): tensor {} must be 2D{}, got {}", i,
                                   i == 0 || i + 1 == n ? " or 1D" : "",
                                   shape_str(tensors[i].sizes())));
    if (m[i].dtype() != m[0].dtype())
      throw DTypeError(
          fmt::format("multi_dot(): all tensors must have the same dtype, got {} and {}",
                      dtype_name(m[0].dtype()), dtype_name(m[i].dtype())));
    if (i > 0 && m[i - 1].size(1) != m[i].size(0))
      throw ShapeError(
          fmt::format("multi_dot(): tensors {} and {} with shapes {} and {} cannot be multiplied",
                      i - 1, i, shape_str(m[i - 1].sizes()), shape_str(m[i].sizes())));
  }
  // p[i], p[i + 1]: matrix i's sizes. cost[i][j]: the least multiply-adds for i..j; split[i][j]
  // the k after which that product splits.
  std::vector<double> p(n + 1);
  for (std::size_t i = 0; i < n; ++i) p[i] = double(m[i].size(0));
  p[n] = double(m[n - 1].size(1));
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0));
  std::vector<std::vector<std::size_t>> split(n, std::vector<std::size_t>(n, 0));
  for (std::size_t len = 1; len < n; ++len)
    for (std::size_t i = 0; i + len < n; ++i) {
      const std::size_t j = i + len;
      cost[i][j] = -1;
      for (std::size_t k = i; k < j; ++k) {
        const double c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1];
        if (cost[i][j] < 0 || c < cost[i][j]) cost[i][j] = c, split[i][j] = k;
      }
    }
  const auto product = [&](const auto& self, std::size_t i, std::size_t j) -> Tensor {
    if (i == j) return m[i];
    return matmul(self(self, i, split[i][j]), self(self, split[i][j] + 1, j));
  };
  Tensor out = product(product, 0, n - 1);
  if (last_vector) out = out.squeeze(1);
  if (first_vector) out = out.squeeze(0);
  return out;
}

Tensor chain_matmul(const std::vector<Tensor>& matrices) {
  if (matrices.empty()) throw ValueError("chain_matmul(): Expected one or more matrices");
  for (std::size_t i = 0; i < matrices.size(); ++i)
    if (!matrices[i].defined() || matrices[i].dim() != 2)
      throw ShapeError(fmt::format(
          "chain_matmul(): tensor {} must be 2-D, got {}", i,
          matrices[i].defined() ? shape_str(matrices[i].sizes()) : std::string("undefined")));
  if (matrices.size() == 1) return matrices[0].clone();
  return multi_dot(matrices);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  check_defined("mm", {&a, &b});
  check_rank("mm", a, 2, "self");
  check_rank("mm", b, 2, "mat2");
  if (a.size(1) != b.size(0))
    throw ShapeError(fmt::format("mm: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
                                 a.size(0), a.size(1), b.size(0), b.size(1)));
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_defined("bmm", {&a, &b});
  check_rank("bmm", a, 3, "batch1");
  check_rank("bmm", b, 3, "batch2");
  if (a.size(0) != b.size(0) || a.size(2) != b.size(1))
    throw ShapeError(fmt::format("bmm: expected batch2 of shape [{}, {}, *], got {} and {}",
                                 a.size(0), a.size(2), shape_str(a.sizes()), shape_str(b.sizes())));
  return matmul(a, b);
}

Tensor mv(const Tensor& a, const Tensor& v) {
  check_defined("mv", {&a, &v});
  check_rank("mv", a, 2, "the matrix");
  check_rank("mv", v, 1, "the vector");
  if (a.size(1) != v.size(0))
    throw ShapeError(fmt::format("mv: size mismatch, got input ({}x{}) and vec ({})", a.size(0),
                                 a.size(1), v.size(0)));
  return matmul(a, v);
}

// The add* forms: their row's autocast, then beta · input + alpha · the checked product.
#define FERRY_ADD_PRODUCT(NAME, PRODUCT)                                                          \
  Tensor NAME(const Tensor& input, const Tensor& x, const Tensor& y, double beta, double alpha) { \
    check_defined(#NAME, {&input, &x, &y});                                                       \
    if (ferry::detail::autocast_applies(OpId::NAME)) {                                            \
      const ferry::detail::AutocastOp ac(OpId::NAME, {&input, &x, &y});                           \
      return NAME(ac(input), ac(x), ac(y), beta, alpha);                                          \
    }                                                                                             \
    return add_scaled(#NAME, input, PRODUCT, beta, alpha);                                        \
  }

FERRY_ADD_PRODUCT(addmm, mm(x, y))
FERRY_ADD_PRODUCT(addmv, mv(x, y))
FERRY_ADD_PRODUCT(baddbmm, bmm(x, y))
FERRY_ADD_PRODUCT(addbmm, ferry::sum(bmm(x, y), {0}))
FERRY_ADD_PRODUCT(addr, outer(x, y))
#undef FERRY_ADD_PRODUCT

}  // namespace ferry
