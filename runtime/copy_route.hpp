// runtime/copy_route.hpp — how bytes go from one device's memory to another's,
// decided in one place for every copy the core makes. Internal to the core.
//
// Note [Copy routes]
// A copy between two storages takes one of these routes, chosen from the two
// devices' capabilities() (Note [Capabilities] in ferry/backend.hpp) and
// whether each side's memory is host-visible:
//  - on_device: one device; copy_within.
//  - host:      the host reaches the destination's memory: a memcpy when it
//               reaches the source's too, else copy_to_host straight into
//               place.
//  - gather:    the same, but the source has staging memory: the transfer
//               planner gathers many storages through the source's staging
//               buffers in batches (a single copy is a copy_to_host, as
//               `host`).
//  - upload:    the host reaches the source's memory only: copy_from_host
//               from it (the planner pipelines uploads through the
//               destination's staging memory in chunks, as `staged`).
//  - peer:      the destination copies straight from the source
//               (copy_from_peer): both are of one backend and the destination
//               claims peer_copy. A device may still refuse a pair at run
//               time (no peer access between two GPUs); the copy then goes
//               `staged`.
//  - staged:    through host memory: copy_to_host, then copy_from_host (in
//               chunks, through the destination's staging memory when it has
//               some).
//  - dma:       one side is a CPU storage pinned for the other side's device
//               (Buffer::registration, Note [Pinned host memory]): that device
//               copies between its memory and the registration (copy_within,
//               its copy engine), and the call waits for it (dma_copy). Taken
//               even where the host could map the device's memory: a memcpy
//               across a GPU's BAR is slower than its copy engine.
// Tensor::to (copy_storage_bytes), the transfer planner's execution and its
// explain() and peak_bytes() all take the route from copy_route(), so what
// the plan reports is what runs.
#pragma once

#include <cstddef>
#include <string_view>

#include "ferry/backend.hpp"

namespace ferry::detail {

enum class CopyRoute { on_device, host, gather, upload, peer, staged, dma };

// The route from `src` to `dst`; `*_host_visible`: whether that side's memory
// is host-visible (a buffer's host_ptr() when the buffer exists, the device's
// caps.host_visible_memory when it is still to be allocated); `pinned`:
// whether the CPU side is pinned for the other device (then: dma).
CopyRoute copy_route(const DeviceImpl& src, bool src_host_visible, const DeviceImpl& dst,
                     bool dst_host_visible, bool pinned = false);
// The route for one copy from `src_buffer`; `dst_buffer` null when the
// destination is still to be allocated (by `dst`, as its capabilities say).
CopyRoute copy_route(const DeviceImpl& src, const Buffer& src_buffer, const DeviceImpl& dst,
                     const Buffer* dst_buffer);
// A copy on the route `dma`: enqueued on the device side, then waited for.
void dma_copy(DeviceImpl& dst, Buffer& dst_buffer, std::size_t dst_offset, DeviceImpl& src,
              const Buffer& src_buffer, std::size_t src_offset, std::size_t bytes);
// The route for storages of these devices as their capabilities say.
CopyRoute copy_route(const DeviceImpl& src, const DeviceImpl& dst);
// "on the device", "by the host", ...: for explain() and logs.
std::string_view copy_route_name(CopyRoute r);

}  // namespace ferry::detail
