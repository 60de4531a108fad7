// The C API of peer access and peer copies (memarea.h, seeds 000 and 003).
#include "capi/c_call.hpp"

#include <memarea/c_interop.hpp>
#include <memarea/copy.hpp>
#include <memarea/memarea.h>
#include <memarea/peer.hpp>

using memarea::detail::c_call;
using memarea::detail::c_call_hot;
using memarea::detail::require;

extern "C" {

memarea_status memarea_device_can_access_peer(int* can_access, int device, int peer_device) {
  return c_call(__func__, [&] {
    require(can_access, "can_access");
    *can_access = memarea::peer::can_access(device, peer_device) ? 1 : 0;
  });
}

memarea_status memarea_device_enable_peer_access(int peer_device, unsigned flags) {
  return c_call(__func__, [&] { memarea::peer::enable(peer_device, flags); });
}

memarea_status memarea_device_disable_peer_access(int peer_device) {
  return c_call(__func__, [&] { memarea::peer::disable(peer_device); });
}

memarea_status memarea_device_get_p2p_attribute(int* value, memarea_p2p_attribute attr,
                                                int src_device, int dst_device) {
  const int raw = memarea::detail::enum_bits(attr);
  return c_call(__func__, [&] {
    require(value, "value");
    memarea::detail::require_enum(raw, MEMAREA_P2P_ATTR_PERFORMANCE_RANK,
                                  MEMAREA_P2P_ATTR_ARRAY_ACCESS_SUPPORTED, "attr");
    *value = memarea::peer::attribute(memarea::from_c(attr), src_device, dst_device);
  });
}

// The peer copies take c_call_hot, as memarea_memcpy does: the same statuses and messages,
// made only on failure.
memarea_status memarea_memcpy_peer(void* dst, int dst_device, const void* src, int src_device,
                                   size_t size) {
  return c_call_hot(__func__,
                    [&] { memarea::copy_peer(dst, dst_device, src, src_device, size); });
}

memarea_status memarea_memcpy_peer_async(void* dst, int dst_device, const void* src,
                                         int src_device, size_t size, memarea_stream_t stream) {
  return c_call_hot(__func__, [&] {
    memarea::copy_peer_async(dst, dst_device, src, src_device, size, memarea::from_c(stream));
  });
}

}  // extern "C"
