// Internals of copies: validation, path choice and the pipelined staging path.
#pragma once

#include "core/memory/registry.hpp"
#include "core/stream_impl.hpp"

#include <cstddef>

namespace memarea::detail {

/// What memarea knows of one end of a copy: from its registry, else from the driver, else it is
/// pageable host memory nobody manages (kind UNKNOWN, device CPU).
struct endpoint {
  memarea_memory_kind kind = MEMAREA_MEMORY_UNKNOWN;
  int device = MEMAREA_CPU_DEVICE_ID;  ///< where the memory lives (CPU id for host memory)
  int context = -1;                    ///< the device whose context made it (-1: none known)
  /// Device memory of one device (plain or opened through IPC): what peer paths are for.
  bool on_device() const noexcept {
    return (kind == MEMAREA_MEMORY_DEVICE || kind == MEMAREA_MEMORY_IPC_IMPORTED) && device >= 0;
  }
};

/// The device whose default stream runs a copy when the caller names no stream: the device
/// side of the copy, else whoever allocated either end, else the current device. (A memset
/// passes its one end twice.)
int default_device(const endpoint& d, const endpoint& s);

/// How a copy was carried out (the calling thread's last copy, for the developer tools; tests
/// read it through testing/memarea_testing.hpp).
enum class copy_path {
  none,         ///< nothing was copied (n == 0)
  host,         ///< std::memmove: no GPU backend
  driver,       ///< the driver's copy (same device, host <-> device, managed)
  driver_peer,  ///< the driver's peer copy (peer access on in either direction)
  driver_staged,///< the driver's peer copy with access off (too short to pipeline: it stages)
  staged,       ///< memarea's pipelined copy through pinned host buffers
};
/// The path of the calling thread's last copy.
copy_path last_copy_path() noexcept;
/// "none", "host", "driver", "driver_peer", "driver_staged" or "staged".
const char* to_string(copy_path p) noexcept;

/// Settings of the staged path. The pipeline's time for n bytes in chunks of c is about
/// (n + c) / bandwidth + (n / c) * t0: one chunk to fill it (whatever the order of chunk
/// sizes, the largest is paid twice), plus a fixed cost t0 per copy-engine copy (a few
/// microseconds over a PCIe link). The best chunk is
/// sqrt(n * t0 * bandwidth) = sqrt(n * chunk_cost): chunk_for(n) takes the power of two at or
/// below it, clamped to [min_chunk, chunk]. One pinned block of `buffers` chunks of the largest
/// size per ordered pair holds the chunks in flight; a copy in smaller chunks carves it into
/// more slots, so the source side never waits for the other GPU while a slot is free. (A
/// second pipeline on streams of its own did not hide t0; neither did SM-driven
/// copies through mapped host memory, nor stream memory operations in place of events:
/// bench/experiments/staging_paths.cu.) Copies of at most driver_up_to bytes, or of at most
/// two chunks, go to the driver's own staging (too little to overlap). Defaults can be
/// changed with MEMAREA_STAGING_CHUNK, _MIN_CHUNK, _CHUNK_COST, _BUFFERS and _DRIVER_UP_TO.
struct staging_settings {
  /// Largest chunk. 4 MiB: 8 MiB chunks moved slightly more one way from a large copy, but
  /// clearly less with both directions at once.
  std::size_t chunk = std::size_t{4} << 20;
  int buffers = 8;                                  ///< largest chunks the pinned block holds, 2..16
  std::size_t min_chunk = std::size_t{1} << 20;     ///< smallest chunk chunk_for picks
  /// Bytes the link moves in t0 (t0 times a PCIe link's bandwidth is a little under this);
  /// 256 KiB makes the power of two below the square root the measured best (16 MiB -> 2 MiB
  /// chunks, 64 MiB -> 4 MiB).
  std::size_t chunk_cost = std::size_t{256} << 10;
  std::size_t driver_up_to = std::size_t{4} << 20;  ///< copies this short use the driver

  /// The chunk size a copy of n bytes uses.
  std::size_t chunk_for(std::size_t n) const noexcept;
  /// Whether a copy of n bytes goes to the driver's own staging.
  bool use_driver(std::size_t n) const noexcept {
    return n <= driver_up_to || n <= 2 * chunk_for(n);
  }
};
/// The current staging settings.
staging_settings staging() noexcept;
/// Changes them (tests use small chunks; benches tune). Pooled buffers of other settings are
/// freed once idle. invalid_value for chunk, min_chunk or chunk_cost 0, or buffers outside
/// 2..16.
void set_staging(const staging_settings& s);
/// Destroys the idle staging buffers, streams and events that belong to device (a device reset
/// would destroy them under the cache). Copies in flight keep theirs.
void drop_staging(int device);

/// Copies n bytes of device memory of src_device to device memory of dst_device through pinned
/// host buffers: chunk i+1 goes device->host on a stream of src_device while chunk i goes
/// host->device on a stream of dst_device. Ordered after the work queued on `on` so far; work
/// queued on `on` later waits for the whole copy. Returns once everything is queued: the pool
/// hands the buffers to the next copy only behind events that order it after this one.
void staged_copy(void* dst, int dst_device, const void* src, int src_device, std::size_t n,
                 stream_ref on);

}  // namespace memarea::detail
