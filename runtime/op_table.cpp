// runtime/op_table.cpp — the rows of ops/ops.table (Note [The op table] in
// ferry/op.hpp) and the dtype rule every front-end and backend reads from them.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "ferry/error.hpp"
#include "ferry/op.hpp"

namespace ferry {
namespace {

constexpr OpInfo kRows[] = {
#include "op_table_rows.inc"
};
static_assert(std::size(kRows) == kOpCount);
constexpr bool rows_in_id_order() {
  for (std::size_t i = 0; i < std::size(kRows); ++i)
    if (std::size_t(kRows[i].id) != i) return false;
  return true;
}
static_assert(rows_in_id_order());

std::string dtype_list(DTypeSet s) {
  std::string r;
  for (DType d : kAllDTypes)
    if (s.has(d)) r += fmt::format("{}{}", r.empty() ? "" : ", ", dtype_name(d));
  return r;
}

}  // namespace

std::string_view op_kind_name(OpKind kind) {
  static constexpr std::string_view kNames[] = {
#define FERRY_OP_KIND_NAME(k) #k,
      FERRY_OP_KINDS(FERRY_OP_KIND_NAME)
#undef FERRY_OP_KIND_NAME
  };
  const auto i = std::size_t(kind);
  if (i >= std::size(kNames))
    throw Error(fmt::format("op kind {} is not a kind of the op table", i));
  return kNames[i];
}

bool OpInfo::builtin_kernel(std::string_view backend) const {
  if (backend == "cpu") return builtin_backends & kOpOn_cpu;
  if (backend == "cuda") return builtin_backends & kOpOn_cuda;
  if (backend == "vulkan") return builtin_backends & kOpOn_vulkan;
  return false;
}

const OpInfo& op_info(OpId op) {
  const auto i = std::size_t(op);
  if (i >= kOpCount) throw Error(fmt::format("op id {} is not in the op table", i));
  return kRows[i];
}

std::span<const OpInfo> op_table() { return kRows; }

std::optional<OpId> op_from_name(std::string_view name) {
  for (const OpInfo& r : kRows)
    if (r.name == name) return r.id;
  return std::nullopt;
}

void check_op_dtype(OpId op, DType dt, std::string_view what) {
  const OpInfo& r = op_info(op);
  if (r.dtypes.has(dt)) return;
  const bool floats_only = (r.dtypes & DTypeSet::integer()).empty();
  throw DTypeError(fmt::format("{}: not defined for {} ({}); it takes {}{}", r.name, dtype_name(dt),
                               what, dtype_list(r.dtypes),
                               floats_only            ? "; cast to a floating dtype first"
                               : dt == DType::boolean ? "; cast to an integer or float dtype first"
                                                      : ""));
}

DType op_compute_dtype(OpId op, DType promoted) {
  const OpInfo& r = op_info(op);
  if (r.compute == OpCompute::float_ && !is_floating(promoted)) return DType::f32;
  return promoted;
}

DType op_result_dtype(OpId op, DType compute) {
  switch (op_info(op).result) {
    case OpResult::bool_:
      return DType::boolean;
    case OpResult::i64:
      return DType::i64;
    case OpResult::widen:
      return is_floating(compute) ? compute : DType::i64;
    case OpResult::same:
    case OpResult::given:
      break;
  }
  return compute;
}

}  // namespace ferry
