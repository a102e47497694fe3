// runtime/distributed/chunked_staging.hpp — an in-place reduction of a device tensor through
// pinned host memory, in chunks, for process groups whose library takes host memory (mpi).
//
// Note [Chunked staging]
// Staging a device tensor whole costs a copy down, the collective, and a copy up, one after the
// other. In chunks (FERRY_DISTRIBUTED_CHUNK bytes, 4 MiB by default; 0 stages whole) the three
// overlap: while the library reduces chunk i on the group's thread, one helper thread copies
// the chunks after it down (the host buffer holds the whole tensor, so it never waits for room)
// and another copies the reduced ones back up; the two are made once per call. The host memory
// is pinned for the device (Note [Pinned host memory]), so each copy is the device's DMA at the
// bus's speed, and completes before its thread moves on. A tensor of one chunk or less is staged
// whole. The device's queue takes copies from several host threads (Note [Device
// thread-safety]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>

#include "ferry/tensor.hpp"

namespace ferry::distributed {

// The chunk size from FERRY_DISTRIBUTED_CHUNK (bytes; ValueError when not a number), else 4 MiB.
std::size_t staging_chunk_bytes();

// Reduces `t` (on a device other than the CPU) in place: its values, as dtype `wide`, pass to
// `reduce(host pointer, elements)` chunk by chunk, then `finish(host chunk)` (avg's division),
// then back into t. Returns once t holds the result.
void reduce_in_chunks(const Tensor& t, DType wide, std::size_t chunk_bytes,
                      const std::function<void(void*, std::size_t)>& reduce,
                      const std::function<void(Tensor&)>& finish);

// Starts a helper thread running its argument: std::thread's constructor unless given (a test
// gives one that refuses, as an exhausted system would).
using HelperStarter = std::function<std::thread(std::function<void()>)>;

// Runs down(i), then reduce(i), then up(i) for every chunk i in [0, chunks), with the copies on
// two helper threads made once for the call (not a thread per copy): the host buffer holds the
// whole tensor, so the down helper never waits for a slot and copies every chunk in order while
// the calling thread reduces behind it; the up helper copies each chunk back once it is reduced.
// The first error (from any of the three, or a helper the system would not make: a
// DistributedError, or std::bad_alloc) stops all three and is thrown here, after every helper that
// started has ended, so no copy outlives the memory it uses.
void run_chunk_pipeline(std::int64_t chunks, const std::function<void(std::int64_t)>& down,
                        const std::function<void(std::int64_t)>& up,
                        const std::function<void(std::int64_t)>& reduce,
                        const HelperStarter& start_helper = {});

}  // namespace ferry::distributed
