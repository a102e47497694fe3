// runtime/distributed/chunked_staging.hpp — a collective of device tensors staged through
// pinned host memory, in chunks, for process groups whose library takes host memory (mpi).
//
// Note [Chunked staging]
// Staging a device tensor whole costs a copy down, the collective, and a copy up, one after the
// other. In chunks (FERRY_DISTRIBUTED_CHUNK bytes, 4 MiB by default; 0 stages whole) the three
// overlap: while the library runs chunk i on the group's thread, one helper thread copies
// the chunks after it down (the host buffer holds the whole tensor, so it never waits for room)
// and another copies the finished ones back up; the two are made once per call. The host memory
// is pinned for the device where Tensor::pin_memory() pins (a discrete GPU, or a device whose
// memory the host cannot map: Note [Pinned host memory]), so each copy is the device's DMA at
// the bus's speed; a device whose memory the host maps is copied by memcpy. Either way a copy
// completes before its thread moves on. A tensor of one chunk or less is staged
// whole. The device's queue takes copies from several host threads (Note [Device
// thread-safety]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "ferry/tensor.hpp"

namespace ferry::distributed {

// The chunk size from FERRY_DISTRIBUTED_CHUNK (bytes; ValueError when not a number), else 4 MiB.
std::size_t staging_chunk_bytes();

// Stages a collective's operands through host memory, chunk by chunk (the Note). `reads` and
// `writes` are blocks of one number of elements each, on any devices: a tensor is one block;
// allgather's output, reduce_scatter's input and all_to_all's operands are one block per rank.
// For each chunk, the chunk of every read block is copied down into one host run `in`, laid one
// block after another ([block][chunk length], the layout MPI's collectives take for per-rank
// blocks); `run(in, out)` runs the library on it; then `out` (the same layout, one run per
// written block) is copied up. With `one_buffer`, in and out are one run (in-place
// collectives: allreduce, broadcast). The host runs are of `dtype` (the library's: a 16-bit
// float is reduced in f32); a block of another dtype or strides is converted on its device
// first, and a written one through a device temporary copied back at the end. A block written
// that is also read (a tensor reduced in place) is converted once. Returns once every written
// block holds its result. `chunk_elements` is the elements of each block per chunk; 0 stages
// whole.
void stage_in_chunks(const std::vector<Tensor>& reads, const std::vector<Tensor>& writes,
                     DType dtype, bool one_buffer, std::int64_t chunk_elements,
                     const std::function<void(Tensor& in, Tensor& out)>& run);

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
