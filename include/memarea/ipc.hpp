// memarea — inter-process sharing (seed 001): legacy IPC handles with a cache and lifetimes,
// and shareable memory passed as a POSIX file descriptor over a Unix socket.
//
// Lifetime rules (docs/ipc.md has the long version):
//  - export_handle works on any pointer inside a memarea device allocation; open returns the
//    same interior pointer in the importing process.
//  - A handle names one allocation, not an address: after free and a new allocation at the same
//    address the old handle is stale and open fails with invalid_handle.
//  - Freeing exported memory while another process has it open is deferred until the last of
//    them closes (or dies), unless the free policy is `refuse`, which throws busy instead.
//  - Closed mappings stay cached (LRU, set_cache_limit) so re-opening makes no driver call and
//    no system call, however long after the last open (docs/ipc.md#benchmarks has its cost back
//    to back and after a pause). Whether the exporter still lives is kept current by memarea's
//    background thread (every 50 ms), never checked inside a call.
//  - In a child of fork() without exec the parent's IPC state is not inherited: on sim the child
//    is a new importer and exporter; on CUDA and HIP, when the parent had started that backend,
//    the calls fail with not_supported (a child whose parent never used memarea starts afresh).
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/error.hpp>
#include <memarea/owner.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memarea::ipc {

/// The releaser of mapping (owner.hpp): close().
struct mapping_release {
  /// close(ptr); throws what close throws.
  void free(void* ptr, std::size_t size) const;
};

/// Flag of open(): the importing device may differ from the memory's; peer access is enabled
/// as needed (cudaIpcMemLazyEnablePeerAccess; MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS in C).
inline constexpr unsigned lazy_enable_peer_access = 0x1;

/// The 128 bytes that name exported memory. Plain bytes: send them over any channel. The C
/// API's handle holds the same bytes (c_interop.hpp converts).
struct handle {
  std::array<unsigned char, 128> bytes{};

  /// 256 lowercase hex digits (for argv, files, environment variables).
  std::string to_hex() const;
  /// Parses to_hex()'s output; throws invalid_value for anything else (no other checks: a
  /// well-formed but garbage handle fails later, in open, with invalid_handle).
  static handle from_hex(std::string_view hex);
  bool operator==(const handle&) const = default;
};

/// A handle for ptr, any pointer inside a memarea device allocation or inside a live
/// sub-allocation of a device pool (the handle then names that sub-allocation; importers open
/// each pool block once for all of its sub-allocations). The driver is asked once per
/// allocation (per pool block); repeating an export of one pointer is served from a small
/// per-thread cache that a free of the allocation invalidates (a few nanoseconds). Throws
/// not_supported for memarea memory that legacy IPC cannot share (host, managed, imported,
/// shareable, pools of those) and invalid_value for a pointer memarea did not allocate or free
/// memory of a pool.
handle export_handle(const void* ptr);

/// Maps the memory of h in this process and returns the pointer h was exported from, offset
/// included. device -1: the calling thread's current device. flags: 0 or
/// lazy_enable_peer_access (anything else: invalid_value). In the exporting process it returns
/// the original pointer. Opening one handle twice returns the same pointer (reference counted).
/// Throws invalid_handle for garbage, stale (freed) handles and handles of exited processes.
[[nodiscard]] void* open(const handle& h, int device = -1, unsigned flags = 0);

/// Releases one open() of ptr (the pointer open returned). The mapping stays cached after the
/// last close; throws invalid_value when ptr is not open.
void close(void* ptr);

/// An open mapping, closed on destruction (owner.hpp: data() the pointer open returned, size(),
/// reset(), try_reset(), release()). Move-only. After release() the caller closes with close().
class mapping : public owner<mapping_release> {
 public:
  /// Empty: holds nothing.
  mapping() = default;
  /// open(h, device, flags); size() is the bytes from data() to the end of the memory the
  /// handle names (the exported allocation, or pool piece).
  explicit mapping(const handle& h, int device = -1, unsigned flags = 0);

 private:
  explicit mapping(std::pair<void*, std::size_t> opened) noexcept
      : owner(opened.first, opened.second, {}) {}
};

/// What freeing exported memory does while another process has it open.
enum class free_policy {
  defer,   ///< the free succeeds; the driver free waits for the last importer's close or death
  refuse,  ///< the free throws busy (MEMAREA_ERROR_BUSY) and changes nothing
};
/// Sets the process-wide policy (default: defer).
void set_free_policy(free_policy p);
/// The process-wide policy now.
free_policy get_free_policy();
/// A policy for one allocation (ptr: any pointer inside it), overriding the process-wide one
/// until the allocation is freed. invalid_value when ptr is not a memarea allocation.
void set_free_policy(const void* ptr, free_policy p);

/// How many closed mappings stay cached (LRU; default 64, or MEMAREA_IPC_CACHE_LIMIT: decimal
/// digits only, read at the process's first IPC call; any other non-empty value makes the IPC
/// calls fail with invalid_value). Lowering it evicts at once; 0 closes every mapping at its
/// last close.
void set_cache_limit(std::size_t n);
/// The import cache's bound now.
std::size_t cache_limit();
/// Number of closed mappings held in the cache now.
std::size_t cached_mappings();
/// Number of mappings this process opened through the driver (cudaIpcOpenMemHandle,
/// hipIpcOpenMemHandle) in its life: the sub-allocations of one pool block share one. A
/// driver open that a first import's checks then refused (and closed) is not counted.
std::size_t driver_opens();

/// Number of other processes that have the allocation containing ptr open now (dead
/// processes are purged first); 0 for memory never exported.
int importers(const void* ptr);
/// Number of frees waiting for importers (memory freed by the user but not yet by the driver).
std::size_t deferred_frees();
/// Finishes the deferred frees whose importers closed or died, and drops cached mappings whose
/// owner freed the memory or exited. memarea's background thread does this every 50 ms; call
/// it to have it done now. Returns the number of deferred frees finished.
std::size_t collect();
/// Removes from /dev/shm the shared objects (IPC segments, sim device memory, leases) of
/// processes that died without removing them (SIGKILL, abort, _exit, a crash), never a live
/// process's or another user's. memarea's background thread does it when a process first
/// shares memory and every 60 s after; `memarea ipc gc` runs it by hand. Returns how many
/// objects it removed.
std::size_t remove_stale_objects();

/// What a sweep of /dev/shm found (memarea_ipc_sweep_report, with the names).
struct sweep_report {
  std::vector<std::string> removed;  ///< objects of dead processes removed (a dry run: to
                                     ///< remove), named without the leading '/'
  std::size_t live_owners = 0;       ///< processes alive: their objects left alone
  std::size_t left_alone = 0;        ///< objects of other users, or whose owner could not be read
  std::size_t busy = 0;              ///< dead processes another sweep held on to: the next sweep's
};
/// remove_stale_objects() with the whole report; with dry_run it removes nothing and lists what
/// it would remove (`memarea ipc gc --dry-run`).
sweep_report sweep(bool dry_run = false);
/// This process's owner id: the 16 hex digits in the names of the /dev/shm objects it makes
/// ("memarea-<kind>-<owner>-...", its lease "memarea-lease-<owner>"), for a program or test
/// that checks what a process left behind. 0 until the process makes its first shared object
/// (an IPC export, sim device memory, ...), which draws the id; a child of fork() draws its
/// own. Makes nothing.
std::uint64_t owner_id() noexcept;

// --- shareable memory and file descriptors -----------------------------------------------------

/// Memory that can be exported as a POSIX file descriptor (CUDA VMM; memfd on sim).
struct shareable {
  void* ptr = nullptr;    ///< the mapping in this process
  std::size_t size = 0;   ///< its size (rounded up to the driver's granularity)
  int device = 0;         ///< the device it is mapped and accessible on
};
/// Allocates at least size bytes of shareable memory on device (-1: current). not_supported
/// where the device cannot (no VMM or POSIX-fd handles).
shareable create_shareable(std::size_t size, int device = -1);
/// A new file descriptor naming the shareable memory at ptr (its base); the caller closes it.
int export_fd(const void* ptr);
/// Maps the memory fd names (size as exported) on device (-1: current); fd stays the caller's.
shareable import_fd(int fd, std::size_t size, int device = -1);
/// Unmaps and releases shareable memory (created or imported) at ptr.
void release_shareable(void* ptr);

/// Sends fd and payload bytes (at most 65536) over a connected Unix socket (SCM_RIGHTS).
void send_fd(int socket, int fd, const void* payload = nullptr, std::size_t size = 0);
/// Receives what send_fd sent: returns the new descriptor (close-on-exec; the caller closes it)
/// and copies the payload into payload (capacity bytes; a larger payload is invalid_value and
/// the descriptor is closed). *size, when not null, gets the payload's size.
/// Deadline: with timeout_ms >= 0 the whole message must arrive within it (nothing at all:
/// not_found; a message cut short: invalid_value). With timeout_ms < 0 the first byte may take
/// any time, but the rest must follow within 5 s (invalid_value), so a peer that sends part of
/// a message and keeps the socket open cannot block the caller for ever.
int receive_fd(int socket, void* payload = nullptr, std::size_t capacity = 0,
               std::size_t* size = nullptr, int timeout_ms = -1);

}  // namespace memarea::ipc

#pragma GCC visibility pop
