// runtime/distributed/nccl/nccl_types.hpp — NCCL's names for ferry's dtypes and reductions,
// apart from the module so that tests check them on machines without a GPU.
#pragma once

#include <fmt/format.h>
#include <nccl.h>

#include "distributed/collectives.hpp"

namespace ferry::distributed::nccl {

// The dtypes the core hands a module (collectives.hpp). NCCL has no 16-bit integers: an i16
// tensor raises DistributedError, as PyTorch's NCCL group does.
inline ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i8:
      return ncclInt8;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
    case DType::boolean:
      return ncclUint8;
    default:
      throw DistributedError(fmt::format("nccl: NCCL has no type for {}", dtype_name(dt)));
  }
}

inline ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::product:
      return ncclProd;
    case ReduceOp::avg:
      break;
  }
  throw DistributedError("nccl: avg reaches the module as sum");
}

}  // namespace ferry::distributed::nccl
