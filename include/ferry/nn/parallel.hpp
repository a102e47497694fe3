// ferry/nn/parallel.hpp — DistributedDataParallel: one replica of a model per rank (process),
// each training on its own part of the data, gradients averaged across the ranks while the
// backward pass is still running.
//
// Note [DistributedDataParallel]
// Wrapping a module broadcasts its parameters and buffers from rank 0, so every replica starts
// equal. The parameters that require grad are put into buckets in reverse registration order
// (the order backward produces their gradients in, roughly), each at most bucket_cap_mb of one
// dtype on one device, laid out as the transfer planner lays out its arenas (Note [Arena
// packing] in runtime/transfer/arena_packing.hpp). A hook on every parameter
// (autograd::register_post_accumulate_grad_hook) counts the gradients backward has produced. Each
// bucket is one flat tensor, and each of its parameters' gradients a view of its slot there
// (PyTorch's gradient_as_bucket_view: a gradient that comes as a tensor of its own is copied into
// the slot once, and zero_grad(false) keeps the views); when a bucket's gradients are all there,
// its all-reduce (avg) starts on the process group's thread, in place, so communication overlaps
// the rest of the backward pass. When the last bucket has started, backward waits for every bucket:
// after backward() returns, every rank holds the same gradients, and the optimizer step keeps the
// replicas equal. forward() first broadcasts the buffers from rank 0 (BatchNorm's running
// statistics), when broadcast_buffers is set.
//
// A parameter that gets no gradient in a backward pass would leave its bucket waiting forever;
// the next forward() raises Error naming such parameters, unless find_unused_parameters is set:
// then forward() walks the autograd graph from its output, and the parameters it does not reach
// count as ready, contributing the gradient they have (zero where none); one that no rank used
// keeps the gradient it had, none after zero_grad(), as in PyTorch (Note [Unused parameters] in
// runtime/nn/distributed_data_parallel.cpp). Inside no_sync() gradients accumulate locally, with
// no communication; the first backward after it averages what has accumulated (gradient
// accumulation over several micro-batches costs one all-reduce).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ferry/distributed.hpp"
#include "ferry/nn/module.hpp"

namespace ferry::nn {

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  std::shared_ptr<distributed::ProcessGroup> group;  // null: the default group
};

class DistributedDataParallel : public Module {
 public:
  // Error when `module` is null or no process group is initialized.
  explicit DistributedDataParallel(std::shared_ptr<Module> module,
                                   DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;  // removes its hooks

  // The wrapped module's forward, after the buffers' broadcast (and, with
  // find_unused_parameters, the search for parameters its output does not reach).
  Tensor forward(const Tensor& input) override;
  const std::shared_ptr<Module>& module() const { return module_; }
  distributed::ProcessGroup& group() const { return *group_; }
  // The parameters of each bucket, as indices in reverse registration order.
  std::vector<std::vector<std::size_t>> buckets() const;

  // While one lives, backward() leaves gradients local (no all-reduce).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };

  struct Reducer;  // runtime/nn/distributed_data_parallel.cpp

 private:
  std::shared_ptr<Module> module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<distributed::ProcessGroup> group_;
  std::shared_ptr<Reducer> reducer_;
};

}  // namespace ferry::nn
