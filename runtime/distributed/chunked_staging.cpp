// runtime/distributed/chunked_staging.cpp — Note [Chunked staging] (chunked_staging.hpp).
#include "distributed/chunked_staging.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "ferry/autograd.hpp"
#include "ferry/backend.hpp"
#include "ferry/distributed.hpp"
#include "ferry/ferry.hpp"
#include "ferry/kit/env.hpp"

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

void reduce_in_chunks(const Tensor& t, DType wide, std::size_t chunk_bytes,
                      const std::function<void(void*, std::size_t)>& reduce,
                      const std::function<void(Tensor&)>& finish) {
  NoGradGuard no_grad;
  const Device dev = t.device();
  // The values as `wide`, contiguous, on the device: t itself where it already is.
  const bool in_place = t.dtype() == wide && t.is_contiguous();
  const Tensor d = (in_place ? t : t.to(wide).contiguous()).view({-1});
  const std::int64_t n = d.numel();
  const std::int64_t per = std::max<std::int64_t>(
      1, std::int64_t(chunk_bytes == 0 ? std::size_t(n) : chunk_bytes / dtype_size(wide)));
  const std::int64_t chunks = (n + per - 1) / per;
  Tensor host = empty({n}, {.dtype = wide});
  if (chunks > 1) {
    try {
      host = host.pin_memory(dev);
    } catch (const Error&) {
      // The device cannot pin this memory: its copies stage through their own buffers.
    }
  }
  char* const base = static_cast<char*>(host.storage()->buffer().host_ptr()) +
                     std::size_t(host.storage_offset()) * dtype_size(wide);
  const auto part = [&](const Tensor& x, std::int64_t i) {
    return x.narrow(0, i * per, std::min(per, n - i * per));
  };
  const auto down = [&](std::int64_t i) {
    NoGradGuard g;
    Tensor h = part(host, i);
    h.copy_(part(d, i));
  };
  const auto up = [&](std::int64_t i) {
    NoGradGuard g;
    Tensor x = part(d, i);
    x.copy_(part(host, i));
  };
  if (chunks <= 1) {
    down(0);
    reduce(base, std::size_t(n));
    finish(host);
    up(0);
  } else {
    run_chunk_pipeline(chunks, down, up, [&](std::int64_t i) {
      Tensor h = part(host, i);
      reduce(base + std::size_t(i * per) * dtype_size(wide), std::size_t(h.numel()));
      finish(h);
    });
  }
  if (!in_place) const_cast<Tensor&>(t).copy_(d.view(t.sizes()));
  synchronize(dev);
}

}  // namespace ferry::distributed
