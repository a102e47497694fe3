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
// Tensor::to (copy_storage_bytes), the transfer planner's execution and its
// explain() and peak_bytes() all take the route from copy_route(), so what
// the plan reports is what runs.
#pragma once

#include <string_view>

#include "ferry/backend.hpp"

namespace ferry::detail {

enum class CopyRoute { on_device, host, gather, upload, peer, staged };

// The route from `src` to `dst`; `*_host_visible`: whether that side's memory
// is host-visible (a buffer's host_ptr() when the buffer exists, the device's
// caps.host_visible_memory when it is still to be allocated).
CopyRoute copy_route(const DeviceImpl& src, bool src_host_visible, const DeviceImpl& dst,
                     bool dst_host_visible);
// The route for storages of these devices as their capabilities say.
CopyRoute copy_route(const DeviceImpl& src, const DeviceImpl& dst);
// "on the device", "by the host", ...: for explain() and logs.
std::string_view copy_route_name(CopyRoute r);

}  // namespace ferry::detail
