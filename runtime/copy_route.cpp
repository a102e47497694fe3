// runtime/copy_route.cpp — Note [Copy routes] in copy_route.hpp.
#include "copy_route.hpp"

namespace ferry::detail {

CopyRoute copy_route(const DeviceImpl& src, bool src_host_visible, const DeviceImpl& dst,
                     bool dst_host_visible) {
  if (&src == &dst) return CopyRoute::on_device;
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
  }
  return "?";
}

}  // namespace ferry::detail
