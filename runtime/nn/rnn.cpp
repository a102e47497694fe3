// runtime/nn/rnn.cpp — RNN, LSTM, GRU and their cells (ferry/nn/rnn.hpp).
#include "ferry/nn/rnn.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "autocast_internal.hpp"
#include "ferry/autograd.hpp"
#include "ferry/error.hpp"
#include "ferry/nn/functional.hpp"
#include "ferry/nn/init.hpp"
#include "ferry/ops.hpp"
#include "ferry/ops_shape.hpp"
#include "nn_internal.hpp"

// Note [Recurrent layers]
// A layer's direction runs over the sequences as PyTorch's CPU path does: the input's
// contribution to the gates, x W_ihᵀ + b_ih, for every time step in one matrix product, then a
// step at a time the state's, h W_hhᵀ + b_hh, and the gates. Padded input is run as packed
// sequences whose batch never shrinks, so the two share one loop: at time t the first
// batch_sizes[t] rows of the state are advanced (the sequences are packed longest first).
// Forward in time, a sequence that has ended keeps its last state, which is its h_n; backward
// in time, sequences join as t falls, each starting from its row of h0. Everything is ferry's
// differentiable ops, so autograd gives the gradients of the input, the state and every
// weight, on every device; each time step costs one product of [batch, hidden] by
// [hidden, G · hidden] and a few element-wise ops.

namespace ferry::nn {

using detail::bool_str;
using detail::param_options;
using Mode = RNNBase::Mode;

namespace {

std::int64_t gate_count(Mode mode) {
  switch (mode) {
    case Mode::lstm:
      return 4;
    case Mode::gru:
      return 3;
    default:
      return 1;
  }
}

const char* layer_name(Mode mode) {
  switch (mode) {
    case Mode::lstm:
      return "LSTM";
    case Mode::gru:
      return "GRU";
    default:
      return "RNN";
  }
}

// rows [start, start + n) of a state, or nothing for a state that is not kept (c but LSTM's).
Tensor rows(const Tensor& t, std::int64_t start, std::int64_t n) {
  return t.defined() ? t.narrow(0, start, n) : Tensor();
}

Tensor join_rows(const Tensor& a, const Tensor& b) {
  if (!a.defined() || a.size(0) == 0) return b;
  if (!b.defined()) return a;
  return cat({a, b}, 0);
}

// One weight set of a cell or of a layer's direction.
struct CellWeights {
  Tensor w_ih, w_hh, b_ih, b_hh, w_hr;
};

CellWeights unpack(const std::vector<Tensor>& w, bool bias, bool proj) {
  CellWeights c{w[0], w[1], {}, {}, {}};
  if (bias) c.b_ih = w[2], c.b_hh = w[3];
  if (proj) c.w_hr = w.back();
  return c;
}

// One step of the recurrence for the rows of h (and c): gi = x W_ihᵀ + b_ih of those rows.
// Returns h' and c' (undefined but for LSTM). The gates' formulas and their order of operations
// are PyTorch's (ATen's RNN.cpp cells).
std::tuple<Tensor, Tensor> cell(Mode mode, const Tensor& gi, const Tensor& h, const Tensor& c,
                                const CellWeights& w) {
  const Tensor gh = functional::linear(h, w.w_hh, w.b_hh);
  switch (mode) {
    case Mode::rnn_tanh:
      return {tanh(gi + gh), Tensor()};
    case Mode::rnn_relu:
      return {relu(gi + gh), Tensor()};
    case Mode::lstm: {
      const std::vector<Tensor> g = chunk(gi + gh, 4, -1);  // i, f, g, o
      const Tensor c2 = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
      Tensor h2 = sigmoid(g[3]) * tanh(c2);
      if (w.w_hr.defined()) h2 = functional::linear(h2, w.w_hr);
      return {h2, c2};
    }
    case Mode::gru: {
      const std::vector<Tensor> i = chunk(gi, 3, -1), s = chunk(gh, 3, -1);  // r, z, n
      const Tensor r = sigmoid(i[0] + s[0]), z = sigmoid(i[1] + s[1]);
      const Tensor n = tanh(i[2] + r * s[2]);
      return {n + z * (h - n), Tensor()};
    }
  }
  throw Error("RNN: unknown mode");
}

// The op-table row of each mode's cell: its autocast policy (PyTorch's lstm_cell, gru_cell,
// rnn_tanh_cell and rnn_relu_cell compute in the low dtype) is the layers' and the cells'.
OpId cell_op(Mode mode) {
  switch (mode) {
    case Mode::rnn_tanh:
      return OpId::rnn_tanh_cell;
    case Mode::rnn_relu:
      return OpId::rnn_relu_cell;
    case Mode::lstm:
      return OpId::lstm_cell;
    case Mode::gru:
      return OpId::gru_cell;
  }
  throw Error("RNN: unknown mode");
}

// One checked step of a cell (the functional cell ops and the cell modules): input [N, in] or
// [in], h (and c) [N, H] or [H], weights as the cell's; PyTorch's errors, under `name`.
std::tuple<Tensor, Tensor> checked_step(Mode mode, const std::string& name, const Tensor& input,
                                        const Tensor& h, const Tensor& c, const CellWeights& w) {
  const OpId op = cell_op(mode);
  if (ferry::detail::autocast_applies(op)) {
    const ferry::detail::AutocastOp ac(op, {&input, &h, &c, &w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh});
    return checked_step(mode, name, ac(input), ac(h), ac(c),
                        {ac(w.w_ih), ac(w.w_hh), ac(w.b_ih), ac(w.b_hh), {}});
  }
  if (!input.defined()) throw Error(fmt::format("{}: the input is undefined", name));
  if (input.dim() != 1 && input.dim() != 2)
    throw ShapeError(fmt::format("{}: expected the input to be 1-D or 2-D, got shape {}", name,
                                 shape_str(input.sizes())));
  if (!w.w_ih.defined() || !w.w_hh.defined() || w.w_ih.dim() != 2 || w.w_hh.dim() != 2)
    throw ShapeError(fmt::format("{}: w_ih and w_hh must be defined 2-D weights", name));
  const std::int64_t hidden = w.w_hh.size(1), gates = gate_count(mode) * hidden;
  if (w.w_hh.size(0) != gates || w.w_ih.size(0) != gates)
    throw ShapeError(fmt::format(
        "{}: w_ih ({}) and w_hh ({}) must have {} x hidden_size = {} rows for hidden_size {}", name,
        shape_str(w.w_ih.sizes()), shape_str(w.w_hh.sizes()), gate_count(mode), gates, hidden));
  const bool batched = input.dim() == 2;
  const Tensor x = batched ? input : input.unsqueeze(0);
  if (x.size(1) != w.w_ih.size(1))
    throw ShapeError(fmt::format("{}: input has inconsistent input_size: got {} expected {}", name,
                                 x.size(1), w.w_ih.size(1)));
  const std::int64_t batch = x.size(0);
  auto state = [&](const Tensor& s, const char* which) {
    if (!s.defined()) throw Error(fmt::format("{}: {} is undefined", name, which));
    if (s.dim() != input.dim())
      throw ShapeError(fmt::format("{}: {} must be {}-D as the input is, got shape {}", name, which,
                                   input.dim(), shape_str(s.sizes())));
    const Tensor t = batched ? s : s.unsqueeze(0);
    if (t.size(0) != batch)
      throw ShapeError(fmt::format("{}: input batch size {} doesn't match {} batch size {}", name,
                                   batch, which, t.size(0)));
    if (t.size(1) != hidden)
      throw ShapeError(fmt::format("{}: {} has inconsistent hidden_size: got {}, expected {}", name,
                                   which, t.size(1), hidden));
    return t;
  };
  const Tensor hx = state(h, "hx");
  const Tensor cx = mode == Mode::lstm ? state(c, "cx") : Tensor();
  auto [h2, c2] = cell(mode, functional::linear(x, w.w_ih, w.b_ih), hx, cx, w);
  if (!batched) {
    h2 = h2.squeeze(0);
    if (c2.defined()) c2 = c2.squeeze(0);
  }
  return {h2, c2};
}

struct DirectionResult {
  Tensor out, h, c;  // out: [T, state size], the packed steps' states
};

// One layer's direction over packed steps (Note [Recurrent layers]): data [T, in], h0 [N, *]
// and c0 (LSTM) the batch's starting states in packed order.
DirectionResult run_direction(Mode mode, const Tensor& data,
                              const std::vector<std::int64_t>& batch_sizes, const Tensor& h0,
                              const Tensor& c0, const CellWeights& w, bool reverse) {
  // Outside GRU's n gate both biases add to the gates, so they join the projection of every
  // step at once, and each step's product with weight_hh goes without one.
  CellWeights step_w = w;
  Tensor input_bias = w.b_ih;
  if (mode != Mode::gru && w.b_hh.defined()) input_bias = w.b_ih + w.b_hh, step_w.b_hh = Tensor();
  const Tensor gi_all = functional::linear(data, w.w_ih, input_bias);
  const std::size_t steps = batch_sizes.size();
  std::vector<std::int64_t> offset(steps + 1, 0);
  for (std::size_t t = 0; t < steps; ++t) offset[t + 1] = offset[t] + batch_sizes[t];
  std::vector<Tensor> out(steps);
  Tensor h, c;
  if (!reverse) {
    h = h0, c = c0;
    // The states of sequences that ended, latest-ending first when read backwards.
    std::vector<Tensor> ended_h, ended_c;
    for (std::size_t t = 0; t < steps; ++t) {
      const std::int64_t b = batch_sizes[t], live = h.size(0);
      if (b < live) {
        ended_h.push_back(h.narrow(0, b, live - b));
        if (c.defined()) ended_c.push_back(c.narrow(0, b, live - b));
        h = h.narrow(0, 0, b), c = rows(c, 0, b);
      }
      std::tie(h, c) = cell(mode, gi_all.narrow(0, offset[t], b), h, c, step_w);
      out[t] = h;
    }
    if (!ended_h.empty()) {
      ended_h.push_back(h);
      h = cat({ended_h.rbegin(), ended_h.rend()}, 0);
      if (c.defined()) {
        ended_c.push_back(c);
        c = cat({ended_c.rbegin(), ended_c.rend()}, 0);
      }
    }
  } else {
    for (std::size_t k = steps; k-- > 0;) {
      const std::int64_t b = batch_sizes[k], live = h.defined() ? h.size(0) : 0;
      if (b > live) {
        h = join_rows(h, h0.narrow(0, live, b - live));
        c = join_rows(c, rows(c0, live, b - live));
      }
      std::tie(h, c) = cell(mode, gi_all.narrow(0, offset[k], b), h, c, step_w);
      out[k] = h;
    }
  }
  return {steps == 1 ? out[0] : cat(out, 0), h, c};
}

// RNN's and RNNCell's nonlinearity.
Mode nonlinearity_mode(const char* layer, const std::string& nonlinearity) {
  if (nonlinearity == "tanh") return Mode::rnn_tanh;
  if (nonlinearity == "relu") return Mode::rnn_relu;
  throw ValueError(
      fmt::format("{}: unknown nonlinearity '{}' (\"tanh\" or \"relu\")", layer, nonlinearity));
}

std::string shape_text(const Shape& s) { return fmt::format("({})", fmt::join(s, ", ")); }

void check_state(const char* layer, const char* which, const Tensor& t, const Shape& expected) {
  if (t.sizes() != expected)
    throw ShapeError(fmt::format("{}: expected {} of size {}, got {}", layer, which,
                                 shape_text(expected), shape_text(t.sizes())));
}

}  // namespace

// ---------------------------------------------------------------- RNNBase

RNNBase::RNNBase(Mode m, std::int64_t in, std::int64_t hidden, RNNOptions o,
                 const TensorOptions& tensor_options)
    : mode(m), input_size(in), hidden_size(hidden), options(std::move(o)) {
  const char* name = layer_name(mode);
  if (options.dropout < 0 || options.dropout > 1 || std::isnan(options.dropout))
    throw ValueError(fmt::format(
        "{}: dropout should be a number in range [0, 1] representing the probability of an "
        "element being zeroed, got {}",
        name, options.dropout));
  if (hidden_size <= 0)
    throw ValueError(
        fmt::format("{}: hidden_size must be greater than zero, got {}", name, hidden_size));
  if (options.num_layers <= 0)
    throw ValueError(
        fmt::format("{}: num_layers must be greater than zero, got {}", name, options.num_layers));
  detail::check_size(name, "input_size", input_size);
  if (options.proj_size < 0)
    throw ValueError(fmt::format(
        "{}: proj_size should be a positive integer or zero to disable projections, got {}", name,
        options.proj_size));
  if (options.proj_size >= hidden_size)
    throw ValueError(fmt::format("{}: proj_size has to be smaller than hidden_size, got {} >= {}",
                                 name, options.proj_size, hidden_size));
  if (options.proj_size > 0 && mode != Mode::lstm)
    throw ValueError(
        fmt::format("{}: the proj_size argument is only supported for LSTM, not RNN or GRU", name));
  const TensorOptions po = param_options(name, tensor_options);
  const std::int64_t gates = gate_count(mode) * hidden_size, dirs = options.bidirectional ? 2 : 1;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (std::int64_t l = 0; l < options.num_layers; ++l) {
    const std::int64_t layer_in = l == 0 ? input_size : out_size() * dirs;
    for (std::int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = fmt::format("_l{}{}", l, d == 1 ? "_reverse" : "");
      std::vector<std::string>& names = weight_names_.emplace_back();
      auto add = [&](const char* kind, Shape shape) {
        names.push_back(kind + sfx);
        Tensor t = register_parameter(names.back(), empty(shape, po));
        init::uniform_(t, -bound, bound);
      };
      add("weight_ih", {gates, layer_in});
      add("weight_hh", {gates, out_size()});
      if (options.bias) add("bias_ih", {gates}), add("bias_hh", {gates});
      if (options.proj_size > 0) add("weight_hr", {options.proj_size, hidden_size});
    }
  }
}

std::int64_t RNNBase::out_size() const {
  return options.proj_size > 0 ? options.proj_size : hidden_size;
}

std::vector<Tensor> RNNBase::weights(std::int64_t k) const {
  std::vector<Tensor> w;
  for (const std::string& n : weight_names_[static_cast<std::size_t>(k)]) w.push_back(parameter(n));
  return w;
}

std::vector<std::vector<Tensor>> RNNBase::all_weights() const {
  std::vector<std::vector<Tensor>> all;
  for (std::size_t k = 0; k < weight_names_.size(); ++k)
    all.push_back(weights(static_cast<std::int64_t>(k)));
  return all;
}

std::string RNNBase::extra_repr() const {
  std::string s = fmt::format("{}, {}", input_size, hidden_size);
  if (options.proj_size != 0) s += fmt::format(", proj_size={}", options.proj_size);
  if (options.num_layers != 1) s += fmt::format(", num_layers={}", options.num_layers);
  if (!options.bias) s += ", bias=false";
  if (options.batch_first) s += ", batch_first=true";
  if (options.dropout != 0) s += fmt::format(", dropout={}", options.dropout);
  if (options.bidirectional) s += ", bidirectional=true";
  return s;
}

std::tuple<Tensor, Tensor, Tensor> RNNBase::run(const Tensor& input, const PackedSequence* packed,
                                                const Tensor& h0_in, const Tensor& c0_in) {
  const char* name = layer_name(mode);
  const Tensor& raw = packed ? packed->data : input;
  if (!raw.defined()) throw Error(fmt::format("{}.forward: the input is undefined", name));
  // Under autocast the whole recurrence computes as its cell's row says (the low dtype, as
  // PyTorch's cuDNN RNN): input, states and weights cast once here.
  std::optional<ferry::detail::AutocastOp> autocast;
  if (ferry::detail::autocast_applies(cell_op(mode)))
    autocast.emplace(cell_op(mode), std::initializer_list<const Tensor*>{&raw});
  auto cast = [&](const Tensor& t) { return autocast ? (*autocast)(t) : t; };
  const Tensor x = cast(raw);
  if (packed ? x.dim() != 2 : (x.dim() != 2 && x.dim() != 3))
    throw ShapeError(fmt::format("{}: expected {} input, got shape {}", name,
                                 packed ? "packed data of 2-D" : "a 2-D (unbatched) or 3-D",
                                 shape_str(x.sizes())));
  if (x.size(-1) != input_size)
    throw ShapeError(
        fmt::format("{}: input.size(-1) must be equal to input_size. Expected {}, "
                    "got {} (input shape {})",
                    name, input_size, x.size(-1), shape_str(x.sizes())));
  const bool batched = packed || x.dim() == 3;
  // The steps as packed data [T, in] and the batch of each.
  Tensor data;
  std::vector<std::int64_t> batch_sizes;
  std::int64_t steps = 0, batch = 0;
  if (packed) {
    data = x, batch_sizes = packed->batch_sizes;
    if (batch_sizes.empty() || batch_sizes[0] <= 0)
      throw ShapeError(fmt::format("{}: the packed sequence has no time steps", name));
    std::int64_t rows = 0;
    for (std::size_t t = 0; t < batch_sizes.size(); ++t) {
      if (batch_sizes[t] <= 0 || (t > 0 && batch_sizes[t] > batch_sizes[t - 1]))
        throw ShapeError(fmt::format(
            "{}: a packed sequence's batch sizes must be positive and non-increasing, got [{}]",
            name, fmt::join(batch_sizes, ", ")));
      rows += batch_sizes[t];
    }
    if (rows != x.size(0))
      throw ShapeError(
          fmt::format("{}: the packed sequence's batch sizes add up to {} rows but its data has {}",
                      name, rows, x.size(0)));
    steps = static_cast<std::int64_t>(batch_sizes.size()), batch = batch_sizes[0];
  } else {
    Tensor t = batched ? x : x.unsqueeze(1);
    if (batched && options.batch_first) t = t.transpose(0, 1);
    steps = t.size(0), batch = t.size(1);
    if (steps == 0)
      throw ShapeError(
          fmt::format("{}: expected sequence length to be larger than 0, got input shape {}", name,
                      shape_str(x.sizes())));
    data = t.reshape({steps * batch, input_size});
    batch_sizes.assign(static_cast<std::size_t>(steps), batch);
  }
  // The starting states, [layers · D, N, *] (PyTorch's unbatched [layers · D, *] included).
  const std::int64_t dirs = options.bidirectional ? 2 : 1, layers = options.num_layers;
  const bool lstm = mode == Mode::lstm;
  if (lstm && h0_in.defined() != c0_in.defined())
    throw Error("LSTM: give both h0 and c0, or neither");
  auto state = [&](const Tensor& given, const char* which, std::int64_t size) {
    const Shape full{layers * dirs, batch, size};
    if (!given.defined()) return zeros(full, {.dtype = x.dtype(), .device = x.device()});
    if (given.dim() != (batched ? 3 : 2))
      throw ShapeError(
          fmt::format("{}: for {} input, {} should also be {}-D but got {}-D (shape {})", name,
                      batched ? "batched 3-D" : "unbatched 2-D", which, batched ? 3 : 2,
                      given.dim(), shape_str(given.sizes())));
    Tensor s = batched ? given : given.unsqueeze(1);
    check_state(name, which, s, full);
    if (packed && packed->sorted_indices.defined())
      s = index_select(s, 1, packed->sorted_indices.to(s.device()));
    return s;
  };
  const Tensor h0 = state(cast(h0_in), "hx", out_size());
  const Tensor c0 = lstm ? state(cast(c0_in), "cx", hidden_size) : Tensor();
  std::vector<Tensor> h_n, c_n;
  for (std::int64_t l = 0; l < layers; ++l) {
    std::vector<Tensor> outs;
    for (std::int64_t d = 0; d < dirs; ++d) {
      const std::int64_t k = l * dirs + d;
      std::vector<Tensor> w = weights(k);
      for (Tensor& t : w) t = cast(t);
      DirectionResult r =
          run_direction(mode, data, batch_sizes, h0.select(0, k), lstm ? c0.select(0, k) : Tensor(),
                        unpack(w, options.bias, options.proj_size > 0), d == 1);
      outs.push_back(std::move(r.out));
      h_n.push_back(std::move(r.h));
      if (lstm) c_n.push_back(std::move(r.c));
    }
    data = dirs == 1 ? outs[0] : cat(outs, 1);
    if (l + 1 < layers && options.dropout > 0 && is_training())
      data = functional::dropout(data, options.dropout, true);
  }
  Tensor h = stack(h_n, 0), c = lstm ? stack(c_n, 0) : Tensor();
  if (packed) {
    if (packed->unsorted_indices.defined()) {
      const Tensor u = packed->unsorted_indices.to(h.device());
      h = index_select(h, 1, u);
      if (lstm) c = index_select(c, 1, u);
    }
    return {data, h, c};
  }
  Tensor out = data.reshape({steps, batch, dirs * out_size()});
  if (!batched) return {out.squeeze(1), h.squeeze(1), lstm ? c.squeeze(1) : c};
  if (options.batch_first) out = out.transpose(0, 1);
  return {out, h, c};
}

// ---------------------------------------------------------------- RNN, LSTM, GRU

namespace {

PackedSequence repacked(const PackedSequence& in, Tensor data) {
  return {std::move(data), in.batch_sizes, in.sorted_indices, in.unsorted_indices};
}

}  // namespace

RNN::RNN(std::int64_t in, std::int64_t hidden, RNNOptions o, const TensorOptions& to)
    : RNNBase(nonlinearity_mode("RNN", o.nonlinearity), in, hidden, o, to) {}

std::tuple<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& h0) {
  auto [out, h, c] = run(input, nullptr, h0, {});
  return {out, h};
}

std::tuple<PackedSequence, Tensor> RNN::forward(const PackedSequence& input, const Tensor& h0) {
  auto [out, h, c] = run({}, &input, h0, {});
  return {repacked(input, out), h};
}

LSTM::LSTM(std::int64_t in, std::int64_t hidden, RNNOptions o, const TensorOptions& to)
    : RNNBase(Mode::lstm, in, hidden, o, to) {}

std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTM::forward(
    const Tensor& input, const std::tuple<Tensor, Tensor>& state) {
  auto [out, h, c] = run(input, nullptr, std::get<0>(state), std::get<1>(state));
  return {out, {h, c}};
}

std::tuple<PackedSequence, std::tuple<Tensor, Tensor>> LSTM::forward(
    const PackedSequence& input, const std::tuple<Tensor, Tensor>& state) {
  auto [out, h, c] = run({}, &input, std::get<0>(state), std::get<1>(state));
  return {repacked(input, out), {h, c}};
}

GRU::GRU(std::int64_t in, std::int64_t hidden, RNNOptions o, const TensorOptions& to)
    : RNNBase(Mode::gru, in, hidden, o, to) {}

std::tuple<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& h0) {
  auto [out, h, c] = run(input, nullptr, h0, {});
  return {out, h};
}

std::tuple<PackedSequence, Tensor> GRU::forward(const PackedSequence& input, const Tensor& h0) {
  auto [out, h, c] = run({}, &input, h0, {});
  return {repacked(input, out), h};
}

// ---------------------------------------------------------------- the cells

namespace {

std::string cell_name(Mode mode) { return std::string(layer_name(mode)) + "Cell"; }

}  // namespace

RNNCellBase::RNNCellBase(Mode m, std::int64_t in, std::int64_t hidden, bool bias,
                         const TensorOptions& tensor_options)
    : mode(m), input_size(in), hidden_size(hidden) {
  const std::string name = cell_name(m);
  detail::check_size(name, "input_size", in);
  detail::check_size(name, "hidden_size", hidden);
  const TensorOptions po = param_options(name, tensor_options);
  const std::int64_t gates = gate_count(mode) * hidden;
  weight_ih = register_parameter("weight_ih", empty({gates, in}, po));
  weight_hh = register_parameter("weight_hh", empty({gates, hidden}, po));
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({gates}, po));
    bias_hh = register_parameter("bias_hh", empty({gates}, po));
  }
  const double bound = hidden > 0 ? 1.0 / std::sqrt(static_cast<double>(hidden)) : 0.0;
  for (Tensor* t : {&weight_ih, &weight_hh, &bias_ih, &bias_hh})
    if (t->defined()) init::uniform_(*t, -bound, bound);
}

std::string RNNCellBase::extra_repr() const {
  std::string s = fmt::format("{}, {}", input_size, hidden_size);
  if (!bias_ih.defined()) s += ", bias=false";
  if (mode == Mode::rnn_relu) s += ", nonlinearity=relu";
  return s;
}

std::tuple<Tensor, Tensor> RNNCellBase::step(const Tensor& input, const Tensor& h,
                                             const Tensor& c) {
  // An undefined state is zeros of the input's batch (a malformed input is checked_step's).
  auto zero_state = [&](const Tensor& s) {
    if (s.defined() || !input.defined() || (input.dim() != 1 && input.dim() != 2)) return s;
    const Shape shape = input.dim() == 2 ? Shape{input.size(0), hidden_size} : Shape{hidden_size};
    return zeros(shape, {.dtype = input.dtype(), .device = input.device()});
  };
  return checked_step(mode, cell_name(mode), input, zero_state(h),
                      mode == Mode::lstm ? zero_state(c) : Tensor(),
                      {weight_ih, weight_hh, bias_ih, bias_hh, {}});
}

RNNCell::RNNCell(std::int64_t in, std::int64_t hidden, bool bias, const std::string& nonlinearity,
                 const TensorOptions& to)
    : RNNCellBase(nonlinearity_mode("RNNCell", nonlinearity), in, hidden, bias, to) {}

Tensor RNNCell::forward(const Tensor& input, const Tensor& h) {
  return std::get<0>(step(input, h, {}));
}

LSTMCell::LSTMCell(std::int64_t in, std::int64_t hidden, bool bias, const TensorOptions& to)
    : RNNCellBase(Mode::lstm, in, hidden, bias, to) {}

std::tuple<Tensor, Tensor> LSTMCell::forward(const Tensor& input,
                                             const std::tuple<Tensor, Tensor>& state) {
  const auto& [h, c] = state;
  if (h.defined() != c.defined()) throw Error("LSTMCell: give both h and c, or neither");
  return step(input, h, c);
}

GRUCell::GRUCell(std::int64_t in, std::int64_t hidden, bool bias, const TensorOptions& to)
    : RNNCellBase(Mode::gru, in, hidden, bias, to) {}

Tensor GRUCell::forward(const Tensor& input, const Tensor& h) {
  return std::get<0>(step(input, h, {}));
}

namespace functional {

Tensor rnn_tanh_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  return std::get<0>(
      checked_step(Mode::rnn_tanh, "rnn_tanh_cell", input, hx, {}, {w_ih, w_hh, b_ih, b_hh, {}}));
}

Tensor rnn_relu_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                     const Tensor& b_ih, const Tensor& b_hh) {
  return std::get<0>(
      checked_step(Mode::rnn_relu, "rnn_relu_cell", input, hx, {}, {w_ih, w_hh, b_ih, b_hh, {}}));
}

std::tuple<Tensor, Tensor> lstm_cell(const Tensor& input, const std::tuple<Tensor, Tensor>& hx,
                                     const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                                     const Tensor& b_hh) {
  return checked_step(Mode::lstm, "lstm_cell", input, std::get<0>(hx), std::get<1>(hx),
                      {w_ih, w_hh, b_ih, b_hh, {}});
}

Tensor gru_cell(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                const Tensor& b_ih, const Tensor& b_hh) {
  return std::get<0>(
      checked_step(Mode::gru, "gru_cell", input, hx, {}, {w_ih, w_hh, b_ih, b_hh, {}}));
}

}  // namespace functional

}  // namespace ferry::nn
