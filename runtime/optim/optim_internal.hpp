// runtime/optim/optim_internal.hpp — what the optimizers' rules share:
// the fused-call helper, the dtype updates compute in, and reading options
// back from JSON. Internal to the core.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/tensor.hpp"

namespace ferry::optim::detail {

// Insertion-ordered, so saved options read in the order they were written.
using json = nlohmann::ordered_json;

// Note [Fused updates and memory formats]
// A fused kernel walks each tensor's elements in memory order, so a parameter, its gradient and
// its state must be dense in one layout for element i of each to be the same element. A
// contiguous parameter has contiguous state; a channels-last one (a model after
// Module::to(MemoryFormat::channels_last)) has channels-last state, as PyTorch's
// zeros_like(p, memory_format=torch.preserve_format) gives, and its gradient is copied into
// that layout when it is in another. run_fused hands each tensor to the kernel flattened in its
// own memory order, and step() runs the fused kernel only where every state tensor is laid out
// as its parameter; elsewhere the element-wise update runs, which takes any strides.

// t in the layout of `param` (dense: contiguous or channels-last): t itself when it already is.
Tensor laid_out_as(const Tensor& t, const Tensor& param);
// An uninitialized tensor of param's shape and device, of `dtype`, in param's layout.
Tensor empty_laid_out_as(const Tensor& param, DType dtype);

// Runs a fused optimizer kernel (outputs are read and written in place) and
// bumps the outputs' storage versions, as copy_ does for element-wise updates.
// Each tensor must be dense in its own memory format (Note [Fused updates and memory formats]).
void run_fused(OpId op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
               const Attrs& attrs);

// Options read back from load_state_dict's JSON. `where` names the group in
// errors ("param_groups[1]"). Error when the key is missing or of another type.
double json_number(const json& o, const char* key, const std::string& where);
bool json_bool(const json& o, const char* key, const std::string& where);
std::optional<bool> json_optional_bool(const json& o, const char* key, const std::string& where);

// `params`; Error when it is empty (PyTorch's "empty parameter list").
const std::vector<Tensor>& require_params(const std::vector<Tensor>& params, std::string_view who);

// Messages for option checks: "SGD (group 1)" or "SGD (defaults)".
std::string who(std::string_view optimizer, std::optional<std::size_t> group);

}  // namespace ferry::optim::detail
