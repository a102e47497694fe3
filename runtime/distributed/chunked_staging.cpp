// runtime/distributed/chunked_staging.cpp — Note [Chunked staging] (chunked_staging.hpp).
#include "distributed/chunked_staging.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"
#include "ferry/kit/env.hpp"
#include "pinned_memory.hpp"

namespace ferry::distributed {

std::size_t staging_chunk_bytes() {
  return std::size_t(kit::env::whole_number("FERRY_DISTRIBUTED_CHUNK", 0, INT64_MAX,
                                            "a whole number of bytes (0: no chunks)")
                         .value_or(std::int64_t(4) << 20));
}

void run_chunk_pipeline(std::int64_t chunks, const std::function<void(std::int64_t)>& down,
                        const std::function<void(std::int64_t)>& up,
                        const std::function<void(std::int64_t)>& reduce,
                        const HelperStarter& start_helper) {
  std::mutex m;
  std::condition_variable cv;
  std::int64_t copied_down = 0, reduced = 0;
  bool stop = false;
  std::exception_ptr error;
  const auto fail = [&](std::exception_ptr e) {
    std::lock_guard lock(m);
    if (!error) error = e;
    stop = true;
    cv.notify_all();
  };
  const auto start = [&](std::function<void()> body) {
    return start_helper ? start_helper(std::move(body)) : std::thread(std::move(body));
  };
  std::thread down_helper, up_helper;
  try {
    down_helper = start([&] {
      try {
        for (std::int64_t i = 0; i < chunks; ++i) {
          {
            std::lock_guard lock(m);
            if (stop) return;
          }
          down(i);
          std::lock_guard lock(m);
          copied_down = i + 1;
          cv.notify_all();
        }
      } catch (...) {
        fail(std::current_exception());
      }
    });
    up_helper = start([&] {
      try {
        for (std::int64_t i = 0; i < chunks; ++i) {
          {
            std::unique_lock lock(m);
            cv.wait(lock, [&] { return reduced > i || stop; });
            if (reduced <= i) return;
          }
          up(i);
        }
      } catch (...) {
        fail(std::current_exception());
      }
    });
  } catch (const std::system_error& e) {
    // The system would not make a helper: the one that runs stops at its next chunk (the loop
    // below sees `stop` at once) and is joined below, before its copies' memory goes.
    fail(std::make_exception_ptr(DistributedError(fmt::format(
        "distributed: could not start a staging thread for a chunked reduction: {}", e.what()))));
  } catch (...) {
    fail(std::current_exception());  // (no memory for its state): likewise, as it is
  }
  try {
    for (std::int64_t i = 0; i < chunks; ++i) {
      {
        std::unique_lock lock(m);
        cv.wait(lock, [&] { return copied_down > i || stop; });
        if (stop) break;
      }
      reduce(i);
      std::lock_guard lock(m);
      reduced = i + 1;
      cv.notify_all();
    }
  } catch (...) {
    fail(std::current_exception());
  }
  if (down_helper.joinable()) down_helper.join();
  if (up_helper.joinable()) up_helper.join();
  if (error) std::rethrow_exception(error);
}

void stage_in_chunks(const std::vector<Tensor>& reads, const std::vector<Tensor>& writes,
                     DType dtype, bool one_buffer, std::int64_t chunk_elements,
                     const std::function<void(Tensor& in, Tensor& out)>& run) {
  NoGradGuard no_grad;
  const Tensor& first = reads.empty() ? writes.at(0) : reads[0];
  const std::int64_t n = first.numel();
  // Each block as a 1-D run of `dtype` on its device: the tensor itself where it already is one.
  const auto flat = [&](const Tensor& t) {
    return (t.dtype() == dtype && t.is_contiguous() ? t : t.to(dtype).contiguous()).view({-1});
  };
  std::vector<Tensor> down_from, up_to;
  std::vector<std::pair<Tensor, Tensor>> copy_back;  // (written block, its device temporary)
  for (const Tensor& t : reads) down_from.push_back(flat(t));
  for (const Tensor& t : writes) {
    const auto read =
        std::find_if(reads.begin(), reads.end(), [&](const Tensor& r) { return r.is_same(t); });
    up_to.push_back(read != reads.end() ? down_from[std::size_t(read - reads.begin())] : flat(t));
    if (up_to.back().storage() != t.storage()) copy_back.emplace_back(t, up_to.back());
  }
  const std::int64_t per = chunk_elements > 0 ? chunk_elements : std::max<std::int64_t>(1, n);
  const std::int64_t chunks = std::max<std::int64_t>(1, (n + per - 1) / per);
  // Blocks per host run: one run of as many as either side has, with one_buffer.
  const auto one_run = std::int64_t(std::max(down_from.size(), up_to.size()));
  const std::int64_t blocks_in = one_buffer ? one_run : std::int64_t(down_from.size());
  const std::int64_t blocks_out = one_buffer ? one_run : std::int64_t(up_to.size());
  std::optional<Device> device;  // the first block's not on the CPU, whose copies are pinned for
  for (const auto* ts : {&reads, &writes})
    for (const Tensor& t : *ts)
      if (!device && !t.device().is_cpu()) device = t.device();
  // Pinned where Tensor::pin_memory() would pin (Note [Pinned host memory]): a device whose
  // memory the host maps (lavapipe, an integrated GPU) is copied faster by the host's memcpy
  // than by its queue reading registered memory (lavapipe, 2 ranks, a 64 MiB broadcast in 4 MiB
  // chunks: 19-22 ms unpinned, 24-25 ms pinned).
  const std::vector<DeviceImpl*> pinning = ferry::detail::default_pinning_devices();
  const bool pin =
      chunks > 1 && device &&
      std::find(pinning.begin(), pinning.end(), &device_impl(*device)) != pinning.end();
  const auto host_run = [&](std::int64_t blocks) {
    Tensor h = empty({blocks * n}, {.dtype = dtype});
    if (pin) try {
        h = h.pin_memory(*device);
      } catch (const Error&) {
        // The device cannot pin this memory: its copies stage through their own buffers.
      }
    return h;
  };
  Tensor host_in = host_run(blocks_in);
  Tensor host_out = one_buffer ? host_in : host_run(blocks_out);
  // Chunk i of block b lies at [i * per * blocks + b * len, ... + len) of its run.
  const auto length = [&](std::int64_t i) { return std::min(per, n - i * per); };
  const auto region = [&](const Tensor& h, std::int64_t blocks, std::int64_t i) {
    return h.narrow(0, i * per * blocks, length(i) * blocks);
  };
  const auto down = [&](std::int64_t i) {
    NoGradGuard g;
    const Tensor in = region(host_in, blocks_in, i);
    for (std::int64_t b = 0; b < std::int64_t(down_from.size()); ++b)
      in.narrow(0, b * length(i), length(i))
          .copy_(down_from[std::size_t(b)].narrow(0, i * per, length(i)));
  };
  const auto up = [&](std::int64_t i) {
    NoGradGuard g;
    const Tensor out = region(host_out, blocks_out, i);
    for (std::int64_t b = 0; b < std::int64_t(up_to.size()); ++b)
      up_to[std::size_t(b)]
          .narrow(0, i * per, length(i))
          .copy_(out.narrow(0, b * length(i), length(i)));
  };
  const auto run_chunk = [&](std::int64_t i) {
    NoGradGuard g;
    Tensor in = region(host_in, blocks_in, i);
    Tensor out = one_buffer ? in : region(host_out, blocks_out, i);
    run(in, out);
  };
  if (chunks == 1) {
    down(0);
    run_chunk(0);
    up(0);
  } else {
    run_chunk_pipeline(chunks, down, up, run_chunk);
  }
  for (auto& [t, temp] : copy_back) const_cast<Tensor&>(t).copy_(temp.view(t.sizes()));
  for (const Tensor& t : writes) synchronize(t.device());
}

}  // namespace ferry::distributed
