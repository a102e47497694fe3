// runtime/nn/rnn_packing.cpp — PackedSequence and torch.nn.utils.rnn's packing and padding
// (ferry/nn/rnn.hpp). Each is composed of differentiable ops (narrow, cat, stack,
// index_select), so gradients flow from packed data back to the padded input and the other way.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "ferry/error.hpp"
#include "ferry/nn/rnn.hpp"
#include "ferry/ops.hpp"
#include "ferry/ops_shape.hpp"

namespace ferry::nn {

PackedSequence PackedSequence::to(const Device& device) const {
  return {data.to(device), batch_sizes, sorted_indices, unsorted_indices};
}

namespace utils::rnn {

namespace {

// `count` rows shaped as `like`'s rows, holding `value`, on its device and in its dtype.
Tensor padding_rows(const Tensor& like, std::int64_t count, double value) {
  Shape s = like.sizes();
  s[0] = count;
  return full(s, value, {.dtype = like.dtype(), .device = like.device()});
}

Tensor index_tensor(const std::vector<std::int64_t>& v) { return tensor(v); }

}  // namespace

PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<std::int64_t>& lengths,
                                    bool batch_first, bool enforce_sorted) {
  if (!input.defined()) throw Error("pack_padded_sequence: the input is undefined");
  if (input.dim() < 2)
    throw ShapeError(fmt::format(
        "pack_padded_sequence: the input must have a time and a batch dim, got shape {}",
        shape_str(input.sizes())));
  Tensor x = batch_first ? input.transpose(0, 1) : input;
  const std::int64_t steps = x.size(0), batch = x.size(1);
  if (static_cast<std::int64_t>(lengths.size()) != batch)
    throw ShapeError(fmt::format(
        "pack_padded_sequence: expected len(lengths) to be equal to batch_size, but got {} "
        "(batch_size={}, input shape {})",
        lengths.size(), batch, shape_str(input.sizes())));
  for (std::int64_t n : lengths) {
    if (n <= 0)
      throw ValueError(
          "pack_padded_sequence: length of all samples has to be greater than 0, but found an "
          "element in 'lengths' that is <= 0");
    if (n > steps)
      throw ValueError(fmt::format(
          "pack_padded_sequence: a length of {} is longer than the input's {} time steps", n,
          steps));
  }
  std::vector<std::int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  PackedSequence out;
  if (enforce_sorted) {
    if (!std::is_sorted(lengths.begin(), lengths.end(), std::greater<>()))
      throw ValueError(
          "pack_padded_sequence: `lengths` array must be sorted in decreasing order when "
          "`enforce_sorted` is True. You can pass `enforce_sorted=False` to pack_padded_sequence "
          "and/or pack_sequence to sidestep this requirement");
  } else {
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return lengths[a] > lengths[b]; });
    std::vector<std::int64_t> inverse(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) inverse[order[i]] = std::int64_t(i);
    out.sorted_indices = index_tensor(order);
    out.unsorted_indices = index_tensor(inverse);
    x = index_select(x, 1, out.sorted_indices.to(x.device()));
  }
  const std::int64_t longest = batch == 0 ? 0 : lengths[order[0]];
  std::vector<Tensor> steps_data;
  for (std::int64_t t = 0; t < longest; ++t) {
    std::int64_t b = 0;
    while (b < batch && lengths[order[b]] > t) ++b;
    out.batch_sizes.push_back(b);
    steps_data.push_back(x.select(0, t).narrow(0, 0, b));
  }
  if (steps_data.empty()) throw ValueError("pack_padded_sequence: the batch is empty");
  out.data = steps_data.size() == 1 ? steps_data[0] : cat(steps_data, 0);
  return out;
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first,
                                    bool enforce_sorted) {
  if (!lengths.defined() || lengths.dim() != 1 || is_floating(lengths.dtype()) ||
      lengths.dtype() == DType::boolean)
    throw DTypeError(fmt::format(
        "pack_padded_sequence: the lengths must be a 1-D integer tensor, got {}",
        lengths.defined()
            ? fmt::format("{} of shape {}", dtype_name(lengths.dtype()), shape_str(lengths.sizes()))
            : std::string("an undefined tensor")));
  return pack_padded_sequence(input, lengths.to(DType::i64).to_vector<std::int64_t>(), batch_first,
                              enforce_sorted);
}

std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first,
                                               double padding_value,
                                               std::optional<std::int64_t> total_length) {
  const Tensor& data = sequence.data;
  const std::vector<std::int64_t>& bs = sequence.batch_sizes;
  if (!data.defined() || data.dim() < 1 || bs.empty())
    throw Error("pad_packed_sequence: the packed sequence is empty or undefined");
  const std::int64_t steps = static_cast<std::int64_t>(bs.size()), batch = bs[0];
  if (total_length && *total_length < steps)
    throw ValueError(fmt::format(
        "pad_packed_sequence: expected total_length to be at least the length of the longest "
        "sequence in input, but got total_length={} and max sequence length being {}",
        *total_length, steps));
  if (std::accumulate(bs.begin(), bs.end(), std::int64_t(0)) != data.size(0))
    throw ShapeError(fmt::format(
        "pad_packed_sequence: the batch sizes add up to {} steps but the data has {} rows",
        std::accumulate(bs.begin(), bs.end(), std::int64_t(0)), data.size(0)));
  std::vector<Tensor> rows;
  std::int64_t offset = 0;
  for (std::int64_t b : bs) {
    Tensor step = data.narrow(0, offset, b);
    if (b < batch) step = cat({step, padding_rows(step, batch - b, padding_value)}, 0);
    rows.push_back(step);
    offset += b;
  }
  Tensor out = stack(rows, 0);
  if (total_length && *total_length > steps)
    out = cat({out, padding_rows(out, *total_length - steps, padding_value)}, 0);
  std::vector<std::int64_t> lengths(static_cast<std::size_t>(batch), 0);
  for (std::int64_t b : bs)
    for (std::int64_t i = 0; i < b; ++i) ++lengths[static_cast<std::size_t>(i)];
  if (sequence.unsorted_indices.defined()) {
    const std::vector<std::int64_t> u = sequence.unsorted_indices.to_vector<std::int64_t>();
    out = index_select(out, 1, sequence.unsorted_indices.to(out.device()));
    std::vector<std::int64_t> original(lengths.size());
    for (std::size_t j = 0; j < u.size(); ++j)
      original[j] = lengths[static_cast<std::size_t>(u[j])];
    lengths = std::move(original);
  }
  if (batch_first) out = out.transpose(0, 1);
  return {out, index_tensor(lengths)};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  if (sequences.empty()) throw ValueError("pad_sequence: received an empty list of sequences");
  std::int64_t longest = 0;
  for (const Tensor& s : sequences) {
    if (!s.defined() || s.dim() < 1)
      throw ShapeError("pad_sequence: every sequence must be a defined tensor of at least 1 dim");
    const Shape a(s.sizes().begin() + 1, s.sizes().end());
    const Shape b(sequences[0].sizes().begin() + 1, sequences[0].sizes().end());
    if (a != b)
      throw ShapeError(
          fmt::format("pad_sequence: the sequences' trailing dims must match, got shapes {} and {}",
                      shape_str(sequences[0].sizes()), shape_str(s.sizes())));
    longest = std::max(longest, s.size(0));
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences)
    padded.push_back(
        s.size(0) < longest ? cat({s, padding_rows(s, longest - s.size(0), padding_value)}, 0) : s);
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  const Tensor padded = pad_sequence(sequences);
  std::vector<std::int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.size(0));
  return pack_padded_sequence(padded, lengths, false, enforce_sorted);
}

}  // namespace utils::rnn

}  // namespace ferry::nn
