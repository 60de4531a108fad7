// memarea — copies between any two memarea pointers, with the path chosen per call.
//
// Paths: within one device, or between the host and a device, the driver copies. Between
// device memory of two devices, the driver's peer copy runs when peer access is on in either
// direction (see memarea/peer.hpp); otherwise memarea pipelines the copy through pinned host
// buffers that it allocates once and reuses: chunk i+1 leaves the source device while chunk i
// lands on the destination. Chunks grow with the copy (1 to 8 MiB by default); short copies go
// to the driver's own staging. That path orders itself on the caller's stream with events (work
// queued before the call runs first, work queued after waits for the whole copy) and never
// blocks the calling thread.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/stream.hpp>

#include <cstddef>

namespace memarea {

/// Copies n bytes between any memory memarea or the driver knows (device, pinned, mapped,
/// managed, pageable host), like cudaMemcpyDefault; returns when the copy is complete.
/// Throws invalid_value for NULL pointers or ranges that run past their allocation.
void copy(void* dst, const void* src, std::size_t n);
/// As copy, queued on stream s (the default stream: of the device side of the copy).
void copy_async(void* dst, const void* src, std::size_t n, stream_view s);

/// Copies n bytes of device memory of src_device to device memory of dst_device (as
/// hipMemcpyPeer); returns when the copy is complete. Throws invalid_device for a bad ordinal,
/// invalid_value for NULL pointers, for a pointer that is not device memory of the device
/// named with it, and for ranges that run past their allocation. n == 0 copies nothing.
void copy_peer(void* dst, int dst_device, const void* src, int src_device, std::size_t n);
/// As copy_peer, queued on stream s (the default stream: the calling thread's current
/// device's): ordered after the work queued on s so far, and work queued on s later waits for it.
void copy_peer_async(void* dst, int dst_device, const void* src, int src_device, std::size_t n,
                     stream_view s);

}  // namespace memarea

#pragma GCC visibility pop
