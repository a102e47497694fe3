// runtime/autograd/checkpoint.cpp — activation checkpointing (ferry/checkpoint.hpp).
#include "ferry/checkpoint.hpp"

#include "autocast_internal.hpp"
#include "autograd/graph.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/random.hpp"

namespace ferry {

Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                  const std::vector<Tensor>& inputs) {
  if (!fn) throw Error("checkpoint: fn is empty");
  if (!autograd::should_record(inputs)) return fn(inputs);
  const RngState rng = get_rng_state();
  const detail::AutocastState autocast = detail::autocast_state();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = fn(inputs);
  }
  if (!out.defined()) throw Error("checkpoint: fn returned an undefined tensor");
  // record() needs a tensor of its own: fn may hand an input back.
  for (const Tensor& in : inputs)
    if (in.defined() && in.is_same(out)) {
      NoGradGuard no_grad;
      out = out.clone();
    }
  std::vector<autograd::Saved> saved(inputs.begin(), inputs.end());
  autograd::record("CheckpointBackward", inputs, out,
                   [fn, saved, rng, autocast](const Tensor& grad,
                                              const autograd::Needs& needs) -> std::vector<Tensor> {
                     // The second run's gradients are of detached leaves, with no path back
                     // to the inputs' history (PyTorch's reentrant checkpoint refuses too).
                     if (autograd::ApplyingNode::current())
                       throw UnsupportedError(
                           "checkpoint: a backward with create_graph reached a checkpointed "
                           "segment, whose gradients cannot be differentiated again; run the "
                           "segment without checkpoint() for higher-order gradients");
                     std::vector<Tensor> leaves;
                     for (std::size_t i = 0; i < saved.size(); ++i) {
                       Tensor t = saved[i].get();
                       if (t.defined()) {
                         t = t.detach();
                         if (needs[i]) t.requires_grad_();
                       }
                       leaves.push_back(t);
                     }
                     const RngState now = get_rng_state();
                     set_rng_state(rng);
                     Tensor y;
                     try {
                       EnableGradGuard grad_mode;
                       const detail::AutocastStateGuard forward_autocast(autocast);
                       y = fn(leaves);
                     } catch (...) {
                       set_rng_state(now);
                       throw;
                     }
                     set_rng_state(now);
                     if (!y.defined() || y.sizes() != grad.sizes())
                       throw Error("checkpoint: fn's second run gave another shape than its first");
                     if (y.requires_grad()) y.backward(grad);
                     std::vector<Tensor> r(saved.size());
                     for (std::size_t i = 0; i < saved.size(); ++i)
                       if (needs[i] && leaves[i].defined()) r[i] = leaves[i].grad();
                     return r;
                   });
  return out;
}

}  // namespace ferry
