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
#include <cstdint>

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

/// Sets `count` elements of `element_size` bytes (1, 2 or 4) from dst to `value` (as
/// cuMemsetD8/D16/D32), in any memory copy() takes; returns when done. count == 0 sets nothing.
/// Throws invalid_value for an element size other than 1, 2 or 4, a value that does not fit in
/// one element, a NULL or misaligned (to the element size) dst, and a range that runs past its
/// allocation (docs/copies.md).
void memset(void* dst, std::uint32_t value, std::size_t count, std::size_t element_size = 1);
/// As memset, queued on stream s (the default stream: of dst's device, else the current
/// device's). Plain host memory no driver knows is filled by the calling thread once the work
/// queued on s so far is done.
void memset_async(void* dst, std::uint32_t value, std::size_t count, std::size_t element_size,
                  stream_view s);

/// Copies `height` rows of `width` bytes, row i from src + i * src_pitch to dst + i * dst_pitch,
/// between any memory copy() takes (as cudaMemcpy2D with cudaMemcpyDefault); returns when done.
/// width or height 0 copies nothing. Throws invalid_value for NULL pointers, a pitch below the
/// width, an extent ((height - 1) * pitch + width) that overflows, and an extent that runs past
/// its allocation (docs/copies.md).
void copy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
             std::size_t width, std::size_t height);
/// As copy_2d, queued on stream s (the default stream: as copy_async's).
void copy_2d_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                   std::size_t width, std::size_t height, stream_view s);

}  // namespace memarea

#pragma GCC visibility pop
