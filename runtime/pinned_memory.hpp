// runtime/pinned_memory.hpp — pinned (page-locked) host memory for CPU
// tensors: Tensor::pin_memory, the data loader's pin_memory. Internal to the
// core.
//
// Note [Pinned host memory]
// A pinned CPU storage is ordinary host memory (page-aligned, a CPU tensor
// like any other) that is also registered with one or more devices
// (DeviceImpl::register_host_memory: cudaHostRegister on CUDA,
// VK_EXT_external_memory_host on Vulkan). Its Buffer answers registration(d)
// with that device's buffer over the same bytes, and a copy between it and d's
// memory takes the route `dma` (Note [Copy routes]): the device's copy engine
// reads or writes the host memory directly, with no copy into staging memory
// and no host memcpy, which is what makes a migration from pinned memory run
// at the speed of the bus. As PyTorch's blocking copies from pinned memory,
// every copy the core makes through a registration has completed when the
// call returns (Tensor::to, copy_, the transfer planner), so the host may
// write or free the memory afterwards and no copy is ever in flight when a
// pinned buffer is freed.
// Registering memory costs a system call and page-table work proportional to
// its size, so freed pinned blocks are cached by (capacity, devices), like
// PyTorch's CachingHostAllocator, up to kPinnedCacheCap bytes.
// Which devices: Tensor::pin_memory() pins for every available device that
// claims caps.host_registration and is a discrete GPU or has memory the host
// cannot map (an integrated GPU or lavapipe shares the host's memory, a
// memcpy is as fast); pin_memory(device) pins for that one device, whatever
// its memory. Copies between a pinned storage and its device take the DMA
// even where the host could map the device's memory: measured on an H100
// through NVIDIA's Vulkan driver (docs/gpu-results.md, 2026-11-26), a memcpy
// into its mapped BAR moved GPT-2's parameters at 0.36 of one pinned
// cudaMemcpyAsync.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ferry/backend.hpp"
#include "ferry/tensor.hpp"

namespace ferry::detail {

inline constexpr std::size_t kPinnedCacheCap = std::size_t(1) << 30;

// A CPU buffer of at least `bytes` registered with each of `devices`.
// OutOfMemoryError when the host has no memory; UnsupportedError naming the
// device when one of them cannot register it.
std::unique_ptr<Buffer> allocate_pinned(std::size_t bytes, const std::vector<DeviceImpl*>& devices);

// `t` (a CPU tensor) in memory pinned for `devices`: *this when it already
// is, else a contiguous copy (Tensor::pin_memory). DeviceError for a tensor
// not on the CPU.
Tensor pin_tensor(const Tensor& t, const std::vector<DeviceImpl*>& devices);

// Whether `buffer` is pinned host memory (for some device).
bool is_pinned(const Buffer& buffer);

// The devices Tensor::pin_memory() pins for (Note [Pinned host memory]), in
// the registry's order; empty when none.
std::vector<DeviceImpl*> default_pinning_devices();

}  // namespace ferry::detail
