// runtime/copy_route.cpp — Note [Copy routes] in copy_route.hpp.
#include "copy_route.hpp"

namespace ferry::detail {

CopyRoute copy_route(const DeviceImpl& src, bool src_host_visible, const DeviceImpl& dst,
                     bool dst_host_visible, bool pinned) {
  if (&src == &dst) return CopyRoute::on_device;
  if (pinned) return CopyRoute::dma;
  if (dst_host_visible)
    return !src_host_visible && src.capabilities().staging ? CopyRoute::gather : CopyRoute::host;
  if (src_host_visible) return CopyRoute::upload;
  if (dst.capabilities().peer_copy && src.device().type() == dst.device().type())
    return CopyRoute::peer;
  return CopyRoute::staged;
}

CopyRoute copy_route(const DeviceImpl& src, const DeviceImpl& dst) {
  return copy_route(src, src.capabilities().host_visible_memory, dst,
                    dst.capabilities().host_visible_memory);
}

CopyRoute copy_route(const DeviceImpl& src, const Buffer& src_buffer, const DeviceImpl& dst,
                     const Buffer* dst_buffer) {
  const bool src_host = src_buffer.host_ptr() != nullptr;
  const bool dst_host =
      dst_buffer ? dst_buffer->host_ptr() != nullptr : dst.capabilities().host_visible_memory;
  // Pinned memory goes by DMA even where the host could reach the device's
  // memory: a host memcpy into a GPU's mapped BAR (write-combined; reads are
  // uncached) runs at a fraction of the copy engine's speed.
  bool pinned = false;
  if (&src != &dst) {
    if (src.device().is_cpu() && !dst.device().is_cpu())
      pinned = src_buffer.registration(dst).buffer != nullptr;
    else if (dst.device().is_cpu() && !src.device().is_cpu() && dst_buffer)
      pinned = dst_buffer->registration(src).buffer != nullptr;
  }
  return copy_route(src, src_host, dst, dst_host, pinned);
}

void dma_copy(DeviceImpl& dst, Buffer& dst_buffer, std::size_t dst_offset, DeviceImpl& src,
              const Buffer& src_buffer, std::size_t src_offset, std::size_t bytes) {
  if (src.device().is_cpu()) {  // an upload from pinned memory
    const Buffer::Registration r = src_buffer.registration(dst);
    src.synchronize();  // the host's pending writes to the source land first
    dst.copy_within(dst_buffer, dst_offset, *r.buffer, r.offset + src_offset, bytes);
    dst.synchronize();  // the host may write the source again once this returns
    return;
  }
  const Buffer::Registration r = dst_buffer.registration(src);
  dst.synchronize();  // the host's uses of the destination end first
  src.copy_within(*r.buffer, r.offset + dst_offset, src_buffer, src_offset, bytes);
  src.synchronize();  // the host reads the bytes once this returns
}

std::string_view copy_route_name(CopyRoute r) {
  switch (r) {
    case CopyRoute::on_device:
      return "copied on the device";
    case CopyRoute::host:
      return "copied by the host straight into place";
    case CopyRoute::gather:
      return "gathered through the source's staging memory";
    case CopyRoute::upload:
      return "uploaded through staging memory";
    case CopyRoute::peer:
      return "peer copies";
    case CopyRoute::staged:
      return "staged through host memory";
    case CopyRoute::dma:
      return "copied by DMA from pinned memory";
  }
  return "?";
}

}  // namespace ferry::detail
