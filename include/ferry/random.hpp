// ferry/random.hpp — seeded random tensors, identical on every backend.
//
// Note [Counter-based RNG]
// Random numbers come from Philox-4x32-10 (Salmon et al., 2011): element i of
// a draw is a pure function of (seed, offset + i), so the numbers do not
// depend on the device, the thread count or how work is split. manual_seed
// sets the seed and resets the offset; every draw advances the offset by the
// number of counters it used. The math is in include/ferry/kit/math/philox.hpp, shared by
// every backend.
//
// Thread-safety: there is one generator per process, as PyTorch's default
// generator, behind a mutex. manual_seed on any thread reseeds it for every
// thread; each draw reserves its own range of counters under the mutex, so
// draws on different threads never overlap or repeat, and the numbers a draw
// gets depend only on the seed and how many counters were reserved before it
// (its order among the draws of all threads).
#pragma once

#include <cstdint>

#include "ferry/tensor.hpp"

namespace ferry {

void manual_seed(std::uint64_t seed);

// The generator's state: its seed and the next counter. Setting a state taken before some
// draws makes them again, number for number (torch.get_rng_state / set_rng_state), which is
// how checkpoint (ferry/checkpoint.hpp) recomputes a forward with the same dropout masks.
// The generator is the process's: setting its state moves it for every thread, so another
// thread drawing between the get and the set (or during checkpoint's recomputation) sees the
// replayed counters too, and its draws repeat numbers drawn before. Replay on one thread while
// no other draws, as PyTorch's checkpoint assumes of its default generator.
struct RngState {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;
};
RngState get_rng_state();
void set_rng_state(const RngState& state);

// Uniform in [low, high).
Tensor rand(const Shape& shape, const TensorOptions& options = {});
Tensor uniform(const Shape& shape, double low, double high, const TensorOptions& options = {});
// Standard normal (Box-Muller on two uniforms).
Tensor randn(const Shape& shape, const TensorOptions& options = {});
Tensor normal(const Shape& shape, double mean, double stddev, const TensorOptions& options = {});
// Integers uniform in [low, high); i64 unless options say otherwise.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape,
               const TensorOptions& options = {});

// The same draws shaped, typed and placed like t.
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
Tensor randint_like(const Tensor& t, std::int64_t low, std::int64_t high);
// A random permutation of 0 .. n-1 (i64 unless options say otherwise): the
// order of n random 62-bit keys drawn from the generator, sorted on the host
// (as PyTorch's CPU randperm), so the same seed gives the same permutation on
// every device.
Tensor randperm(std::int64_t n, const TensorOptions& options = {});
// 1 with probability p (each element of p in [0, 1]), else 0, in p's dtype.
Tensor bernoulli(const Tensor& p);
// x's shape and dtype, 1 with probability p.
Tensor bernoulli(const Tensor& x, double p);
// num_samples i64 category indices per row of probs ([n] or [rows, n]; non-
// negative weights, not necessarily summing to 1). With replacement each
// draw inverts the running sum of the weights at a uniform draw; without,
// the num_samples largest of log(u) / weight (Efraimidis and Spirakis's
// weighted sampling), in the order drawn. Not PyTorch's random stream.
Tensor multinomial(const Tensor& probs, std::int64_t num_samples, bool replacement = false);

// In place: x's elements replaced by draws of its shape and dtype (floating),
// as PyTorch's Tensor.uniform_, normal_ and exponential_ (rate lambd). Not
// recorded by autograd; a leaf that requires grad is refused, as there.
Tensor& uniform_(Tensor& x, double low = 0, double high = 1);
Tensor& normal_(Tensor& x, double mean = 0, double stddev = 1);
Tensor& exponential_(Tensor& x, double lambd = 1);

}  // namespace ferry
