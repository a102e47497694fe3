// ferry/nn/rnn.hpp — the recurrent layers as PyTorch's: RNN (tanh or relu), LSTM (with
// proj_size) and GRU over padded or packed sequences, stacked and bidirectional, and their
// single-step cells RNNCell, LSTMCell and GRUCell; PackedSequence and torch.nn.utils.rnn's
// pack_padded_sequence, pad_packed_sequence, pad_sequence and pack_sequence.
//
// Parameters and their names are PyTorch's (weight_ih_l0, weight_hh_l0, bias_ih_l0,
// bias_hh_l0, weight_hr_l0 for LSTM's projection, "_reverse" for the backward direction;
// weight_ih ... for a cell), in PyTorch's order and all drawn from U(-1/√hidden_size,
// 1/√hidden_size), so a PyTorch state_dict loads as is. The gates are stacked as PyTorch
// stacks them: LSTM (i, f, g, o), GRU (r, z, n) with n = tanh(W_in x + b_in + r ⊙ (W_hn h +
// b_hn)).
//
// The layers are compositions of ferry's differentiable ops (Note [Recurrent layers] in
// runtime/nn/rnn.cpp), so they run and train on every device: the input's projection for
// every time step is one matrix product per layer and direction, then each step is one
// product with weight_hh and the gates' element-wise ops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ferry/nn/module.hpp"
#include "ferry/tensor.hpp"

namespace ferry::nn {

// torch.nn.utils.rnn.PackedSequence: the time steps of a batch of sequences of different
// lengths, packed without padding. `data` [sum of lengths, *] holds time step 0 of every
// sequence, then step 1 of those still running, ...; batch_sizes[t] says how many sequences
// have a step t (non-increasing). The sequences are packed longest first; where they were not
// given so (enforce_sorted = false), sorted_indices[i] is the batch index of the i-th longest
// and unsorted_indices its inverse (both i64 on the CPU; undefined where the order was kept).
struct PackedSequence {
  Tensor data;
  std::vector<std::int64_t> batch_sizes;
  Tensor sorted_indices, unsorted_indices;

  // The same sequences with data on `device` (the indices stay where they are).
  PackedSequence to(const Device& device) const;
};

namespace utils::rnn {

// input [L, N, *] ([N, L, *] with batch_first), padded; lengths[i] the length of sequence i
// (each in [1, L]). enforce_sorted: the lengths must be non-increasing (a ValueError if not);
// otherwise the sequences are sorted longest first (a stable sort) and the order kept in the
// result's indices. ShapeError for a count of lengths other than N; ValueError for a length
// out of range.
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<std::int64_t>& lengths,
                                    bool batch_first = false, bool enforce_sorted = true);
// lengths as a 1-D integer tensor on any device (read back to the host).
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths,
                                    bool batch_first = false, bool enforce_sorted = true);

// The inverse: [T, N, *] ([N, T, *] with batch_first), T the longest length or total_length
// (a ValueError if shorter), positions past a sequence's end padding_value, the batch in its
// original order; and the lengths (i64 [N], on the CPU).
std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence,
                                               bool batch_first = false, double padding_value = 0.0,
                                               std::optional<std::int64_t> total_length = {});

// Sequences [L_i, *] (the same * for all) stacked into [max L_i, N, *] ([N, max L_i, *] with
// batch_first), each padded with padding_value at its end.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false,
                    double padding_value = 0.0);

// pack_padded_sequence(pad_sequence(sequences), their lengths, false, enforce_sorted).
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace utils::rnn

namespace functional {

// torch.rnn_tanh_cell, rnn_relu_cell, lstm_cell and gru_cell: one step of the recurrence (the
// cells' and the layers' formulas above) from input [N, in] (or unbatched [in]), the state
// [N, H] (or [H]), w_ih [G · H, in], w_hh [G · H, H] and the biases [G · H] (undefined: none),
// G the gates (1, 1, 4, 3). The state must be given. Rows of the op table: under autocast they
// compute in the low dtype, as PyTorch's (so do the layers and cells above). ShapeError for
// sizes that do not fit, naming them.
Tensor rnn_tanh_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = {}, const Tensor& b_hh = {});
Tensor rnn_relu_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih = {}, const Tensor& b_hh = {});
// (h', c') from (h, c).
std::tuple<Tensor, Tensor> lstm_cell(const Tensor& input, const std::tuple<Tensor, Tensor>& hx,
                                     const Tensor& w_ih, const Tensor& w_hh,
                                     const Tensor& b_ih = {}, const Tensor& b_hh = {});
Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih = {}, const Tensor& b_hh = {});

}  // namespace functional

// The constructor's keyword arguments of RNN, LSTM and GRU (PyTorch's defaults).
struct RNNOptions {
  std::int64_t num_layers = 1;
  std::string nonlinearity = "tanh";  // RNN only: "tanh" or "relu"
  bool bias = true;                   // bias_ih and bias_hh
  bool batch_first = false;           // input and output [N, L, *] rather than [L, N, *]
  double dropout = 0.0;               // on each layer's output but the last, in training
  bool bidirectional = false;
  std::int64_t proj_size = 0;  // LSTM only: h projected to this size (0: none)
};

// What RNN, LSTM and GRU share: the parameters, the checks of the input and the state, and
// the recurrence (PyTorch's RNNBase).
class RNNBase : public Module {
 public:
  enum class Mode { rnn_tanh, rnn_relu, lstm, gru };

  RNNBase(Mode mode, std::int64_t input_size, std::int64_t hidden_size, RNNOptions options,
          const TensorOptions& tensor_options);
  std::string extra_repr() const override;
  // PyTorch's: makes cuDNN's weights one block. ferry's layers read the parameters where
  // they are, so there is nothing to do; kept so that ported code calling it compiles.
  void flatten_parameters() {}
  // The parameters of each layer and direction (l · D + d), in PyTorch's order: weight_ih,
  // weight_hh, then bias_ih, bias_hh with a bias, then weight_hr with a projection.
  std::vector<std::vector<Tensor>> all_weights() const;

  Mode mode;
  std::int64_t input_size, hidden_size;
  RNNOptions options;

 protected:
  // The state's size per direction: proj_size, or hidden_size without a projection.
  std::int64_t out_size() const;
  // Runs the layers. `input` a padded [L, N, in] / [N, L, in] / unbatched [L, in], or (when
  // `packed` is set) the packed sequences; h0 (and c0 for LSTM) as PyTorch takes them, or
  // undefined for zeros. Returns the output (padded, or the packed data), h_n and c_n.
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, const PackedSequence* packed,
                                         const Tensor& h0, const Tensor& c0);

 private:
  // The parameters of layer and direction k, looked up by name on each call, so that a
  // parameter replaced (replace_parameter: a tied or shared weight) is the one used.
  std::vector<Tensor> weights(std::int64_t k) const;
  std::vector<std::vector<std::string>> weight_names_;  // per layer and direction
};

// torch.nn.RNN: h_t = act(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh), act tanh or relu.
// forward(input [L, N, input_size] (or [N, L, ...] with batch_first, or unbatched [L, ...]),
// h0 [num_layers · D, N, hidden_size] (or [num_layers · D, hidden_size]; undefined: zeros))
// returns the output [L, N, D · hidden_size] and h_n, as PyTorch's.
class RNN : public RNNBase {
 public:
  RNN(std::int64_t input_size, std::int64_t hidden_size, RNNOptions options = {},
      const TensorOptions& tensor_options = {});
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& h0 = {});
  std::tuple<PackedSequence, Tensor> forward(const PackedSequence& input, const Tensor& h0 = {});
};

// torch.nn.LSTM: gates (i, f, g, o); c_t = σ(f) c_{t-1} + σ(i) tanh(g), h_t = σ(o) tanh(c_t),
// then h_t W_hrᵀ with proj_size. forward(input, (h0, c0)) returns (output, (h_n, c_n)); h0
// [num_layers · D, N, proj_size or hidden_size], c0 [num_layers · D, N, hidden_size], both or
// neither undefined.
class LSTM : public RNNBase {
 public:
  LSTM(std::int64_t input_size, std::int64_t hidden_size, RNNOptions options = {},
       const TensorOptions& tensor_options = {});
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(
      const Tensor& input, const std::tuple<Tensor, Tensor>& state = {});
  std::tuple<PackedSequence, std::tuple<Tensor, Tensor>> forward(
      const PackedSequence& input, const std::tuple<Tensor, Tensor>& state = {});
};

// torch.nn.GRU: r = σ(..), z = σ(..), n = tanh(x W_inᵀ + b_in + r ⊙ (h W_hnᵀ + b_hn)),
// h_t = (1 - z) ⊙ n + z ⊙ h_{t-1}. forward as RNN's.
class GRU : public RNNBase {
 public:
  GRU(std::int64_t input_size, std::int64_t hidden_size, RNNOptions options = {},
      const TensorOptions& tensor_options = {});
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& h0 = {});
  std::tuple<PackedSequence, Tensor> forward(const PackedSequence& input, const Tensor& h0 = {});
};

// What the cells share: weight_ih [G · hidden, input], weight_hh [G · hidden, hidden],
// bias_ih and bias_hh [G · hidden] (G gates), drawn as the layers' are. Inputs [N, input_size]
// or unbatched [input_size]; a state of the input's batch, or undefined for zeros.
class RNNCellBase : public Module {
 public:
  RNNCellBase(RNNBase::Mode mode, std::int64_t input_size, std::int64_t hidden_size, bool bias,
              const TensorOptions& tensor_options);
  std::string extra_repr() const override;

  RNNBase::Mode mode;
  std::int64_t input_size, hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // the biases undefined without bias

 protected:
  // One step: h' (and c' for LSTM) from input, h and c (PyTorch's checks and batching).
  std::tuple<Tensor, Tensor> step(const Tensor& input, const Tensor& h, const Tensor& c);
};

// torch.nn.RNNCell: one step of RNN; nonlinearity "tanh" or "relu".
class RNNCell : public RNNCellBase {
 public:
  RNNCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true,
          const std::string& nonlinearity = "tanh", const TensorOptions& tensor_options = {});
  Tensor forward(const Tensor& input, const Tensor& h);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
};

// torch.nn.LSTMCell: (h', c') from input and (h, c).
class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true,
           const TensorOptions& tensor_options = {});
  std::tuple<Tensor, Tensor> forward(const Tensor& input,
                                     const std::tuple<Tensor, Tensor>& state = {});
};

// torch.nn.GRUCell: one step of GRU.
class GRUCell : public RNNCellBase {
 public:
  GRUCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true,
          const TensorOptions& tensor_options = {});
  Tensor forward(const Tensor& input, const Tensor& h);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
};

}  // namespace ferry::nn
