// memarea — MPI (libmemarea_mpi): device memory shared by the ranks of each node.
//
// A shared_window gives every rank a segment of device memory and a pointer, valid in its own
// process, to the segment of every other rank of its node; share() does the same for buffers
// the ranks already have. Underneath: memarea's IPC handles, exchanged over MPI and opened with
// lazy peer access. Ranks of other nodes are never reachable through them (docs/mpi.md).
//
// Every call named "collective" must be made by every rank of the communicator, in the same order.
// Each step waits at most options::timeout for the other ranks, then fails with failure::timeout;
// ranks whose calls differ (one fences while another destroys) fail with failure::mismatch. Only
// node_comm()'s first call may block without a deadline, and only when a rank dies inside it (MPI's
// own MPI_Comm_create_group follows a bounded step). After a timeout or an MPI error the
// communicators involved are unusable (MPI's own rule: a collective that did not complete
// everywhere cannot be recovered) and the process should abort or exit (MPI_Abort, or exit after
// reporting). A failure of one rank's own step (allocation, export, open) is seen by every rank,
// which all fail alike and change nothing; the communicator stays usable then.
#pragma once

/* Built with -fvisibility=hidden: what this header declares is the library's API. */
#pragma GCC visibility push(default)

#include <memarea/area.hpp>
#include <memarea/error.hpp>
#include <memarea/pool.hpp>
#include <memarea/stream.hpp>

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace memarea::mpi {

/// The longest timeout options::timeout accepts: 10^7 s (about 116 days), as the C API's
/// timeout_seconds.
inline constexpr std::chrono::milliseconds max_timeout{10'000'000'000LL};

/// Options of the collective calls.
struct options {
  /// The longest any one step of a collective call waits for the other ranks; must be in
  /// (0, max_timeout] (else invalid_value at once). A rank that died or never calls fails every
  /// other rank's call after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// shared_window without an area: the device of this rank's segment; -1 picks
  /// (rank within the node) % (number of devices); below -1 is INVALID_DEVICE. Ignored where an
  /// area or pool is given.
  int device = -1;
};

/// Why a collective call failed.
enum class failure : int {
  none = 0,     ///< it did not fail
  rank = 1,     ///< one rank's own step failed (rank() names it); every rank failed alike, the
                ///< communicator stays usable and nothing was left allocated or open
  timeout = 2,  ///< some rank did not reach a step within the timeout: communicator unusable
  mpi = 3,      ///< an MPI call failed: communicator unusable
  mismatch = 4, ///< ranks made different collective calls (rank() names one whose call
                ///< differed): every message was matched, so the communicator given to the
                ///< call stays usable, but the window or buffers are not (destroy them)
};

/// "none", "rank", "timeout", "mpi" or "mismatch".
const char* to_string(failure f) noexcept;

/// What every collective call throws when it fails. status() is the failing rank's own status
/// for failure::rank (e.g. invalid_handle when its open failed), invalid_value for a mismatch
/// and errc::unknown for a timeout or an MPI error; the message names the rank and the cause.
class collective_error : public memarea::error {
 public:
  collective_error(errc code, std::string message, failure kind, int rank)
      : memarea::error(code, std::move(message)), kind_(kind), rank_(rank) {}
  /// Why it failed.
  failure kind() const noexcept { return kind_; }
  /// The rank (in the communicator given to the call) that failed, did not arrive or made
  /// another call, or -1 when no single rank can be named (a timeout of the arrival check, an
  /// MPI error).
  int rank() const noexcept { return rank_; }
  /// Whether the communicator given to the call may still be used (after failure::rank and
  /// failure::mismatch).
  bool communicator_usable() const noexcept {
    return kind_ == failure::rank || kind_ == failure::mismatch;
  }

 private:
  failure kind_;
  int rank_;
};

// libmemarea_mpi's own types, opaque here: hidden, so that nothing of them is exported. The
// members below that only the library calls (those that take or return one of them, and the
// helpers of its own classes) are marked hidden too.
#pragma GCC visibility push(hidden)
namespace detail {
struct group;
struct imports;
struct window_access;
}  // namespace detail
#pragma GCC visibility pop

/// The node queries that shared_buffers and shared_window share: the ranks of this rank's node
/// and how this process reaches each one's memory (shared_buffers::get, shared_window::remote).
/// Not made on its own. Every query of an empty object throws invalid_value.
class node_view {
 public:
  /// The device where node rank r's memory lives.
  int device_of(int node_rank) const;
  /// Whether this rank's device can access node rank r's memory directly (kernels, the
  /// driver's copies): true for its own and same-device memory, and where peer access exists.
  /// Otherwise r's memory is mapped on r's device and memarea::copy stages through pinned host
  /// memory.
  bool can_access(int node_rank) const;
  /// This rank's rank within its node.
  int node_rank() const;
  /// Number of ranks of this rank's node.
  int node_size() const;
  /// The node rank of `rank` (a rank of the communicator given to the collective call); throws
  /// invalid_value naming the node when `rank` lives on another node or does not exist.
  int node_rank_of(int rank) const;
  /// The rank in the communicator given to the collective call of node rank r.
  int rank_of(int node_rank) const;
  /// A communicator of this node's ranks, ordered as the node ranks, for the caller's own use
  /// (memarea's own messages travel on a private one). Valid until the object is closed or
  /// destroyed. The first call makes it, collective over the node's ranks: a step bounded by
  /// the timeout (a rank that never calls it fails the others with failure::timeout), then
  /// MPI_Comm_create_group, which has no deadline; later calls return it.
  MPI_Comm node_comm() const;
  /// True unless empty (closed, destroyed or moved from).
  explicit operator bool() const noexcept { return imports_ != nullptr; }

 protected:
  /// Empty; `name` ("shared_buffers") prefixes the messages of its errors.
  explicit node_view(const char* name) noexcept;
  [[gnu::visibility("hidden")]] node_view(const char* name,
                                          std::unique_ptr<detail::imports> i) noexcept;
  // Never deleted through a node_view pointer: the destructor is protected and not virtual.
  ~node_view();
  node_view(node_view&&) noexcept;
  /// Takes o's imports; the caller closed its own first.
  node_view& operator=(node_view&& o) noexcept;
  node_view(const node_view&) = delete;
  node_view& operator=(const node_view&) = delete;

  /// Takes i as the imports (the caller closed its own first).
  [[gnu::visibility("hidden")]] void adopt(std::unique_ptr<detail::imports> i) noexcept;
  /// The imports; invalid_value naming `call` (as "shared_window::remote") when empty.
  [[gnu::visibility("hidden")]] detail::imports& need(const char* call) const;
  /// Node rank r's memory as this process sees it, checking r (`call` names the query).
  [[gnu::visibility("hidden")]] void* memory_of(int node_rank, const char* call) const;
  /// A barrier step of kind `kind` (a detail::step_kind), named `call`.
  [[gnu::visibility("hidden")]] void step(int kind, const char* call);
  /// The collective close: closes every import, then waits until every rank of the node has
  /// closed its own. Empty afterwards, whatever it throws.
  [[gnu::visibility("hidden")]] void close_imports(const char* call);

 private:
  std::unique_ptr<detail::imports> imports_;
  const char* name_;
};

/// Every node peer's buffer, opened in this process (what share() returns). Move-only.
/// Destruction is collective, as close() (errors are reported on stderr there). The node
/// queries (can_access, node_rank, node_comm, ...) come from node_view.
class shared_buffers : public node_view {
 public:
  /// Empty: shares nothing.
  shared_buffers() noexcept;
  ~shared_buffers();
  shared_buffers(shared_buffers&&) noexcept;
  shared_buffers& operator=(shared_buffers&&) noexcept;
  shared_buffers(const shared_buffers&) = delete;
  shared_buffers& operator=(const shared_buffers&) = delete;

  /// The buffer of node rank r, valid in this process (this rank's own: the buffer it shared).
  /// Throws invalid_value for r outside the node (ranks of other nodes are never reachable).
  void* get(int node_rank) const;
  /// Bytes of node rank r's buffer: from the pointer shared to the end of its allocation (or of
  /// its pool piece).
  std::size_t size(int node_rank) const;
  /// Waits for every rank of the node (deadline: the timeout). Collective over the node;
  /// failure::mismatch when another rank made another call (e.g. close()).
  void barrier();
  /// Closes every peer's buffer, then waits until every rank of the node has closed its own
  /// (so that each may free its buffer on return). Collective over the node; empty afterwards,
  /// whatever it throws.
  void close();

 private:
  friend shared_buffers share(MPI_Comm, const void*, const options&);
  [[gnu::visibility("hidden")]] explicit shared_buffers(
      std::unique_ptr<detail::imports> i) noexcept;
};

/// Shares one buffer per rank with the ranks of its node: `buffer` is any pointer inside memory
/// that memarea can export through IPC (a device allocation, or a live piece of a device pool).
/// Collective over comm. Returns every node peer's pointer, opened in this process with lazy
/// peer access. Throws collective_error: failure::rank when a rank's buffer cannot be
/// exported (not_supported for host, managed or imported memory; invalid_value for a pointer
/// memarea does not know) or opened (naming that rank and its status), on every rank alike.
[[nodiscard]] shared_buffers share(MPI_Comm comm, const void* buffer, const options& o = {});
/// share(comm, b.data(), o).
[[nodiscard]] inline shared_buffers share(MPI_Comm comm, const buffer& b, const options& o = {}) {
  return share(comm, b.data(), o);
}
/// share(comm, b.data(), o).
[[nodiscard]] inline shared_buffers share(MPI_Comm comm, const pool_buffer& b,
                                          const options& o = {}) {
  return share(comm, b.data(), o);
}

/// A window of device memory over the ranks of each node: every rank owns a segment of
/// bytes_per_rank bytes and sees every node peer's. Move-only. Destruction is collective, as
/// destroy() (errors are reported on stderr there). The node queries (can_access, node_rank,
/// node_comm, ...) come from node_view.
class shared_window : public node_view {
 public:
  /// Collective over comm (split by node: ranks of the same host). Each rank allocates its
  /// segment on device options.device (< 0: its node rank modulo the device count), exports
  /// it and opens every other segment of its node. Throws collective_error (every rank alike)
  /// when any rank's allocation, export or open fails, naming that rank, with invalid_value for
  /// bytes_per_rank 0 or bytes_per_rank differing within the node; invalid_value at once for a
  /// bad timeout; no_device where the backend has no devices.
  shared_window(MPI_Comm comm, std::size_t bytes_per_rank, const options& o = {});
  /// As above, with the segment allocated from `a` (device memory: area flags 0).
  shared_window(MPI_Comm comm, std::size_t bytes_per_rank, const area& a,
                const options& o = {});
  /// As above, with the segment a piece of pool `p` (a device pool), which must outlive the
  /// window.
  shared_window(MPI_Comm comm, std::size_t bytes_per_rank, pool& p, const options& o = {});
  ~shared_window();
  shared_window(shared_window&&) noexcept;
  shared_window& operator=(shared_window&&) noexcept;
  shared_window(const shared_window&) = delete;
  shared_window& operator=(const shared_window&) = delete;

  /// This rank's segment.
  void* local() const;
  /// Node rank r's segment, valid in this process (local() for this rank's own). Throws
  /// invalid_value for r outside the node: a window never reaches ranks of other nodes.
  void* remote(int node_rank) const;
  /// bytes_per_rank.
  std::size_t size() const;
  /// The device of this rank's segment.
  int device() const;
  /// Completes this rank's work on its device (memarea::device_synchronize), then waits for
  /// every rank of the node: what any rank wrote to any segment before its fence is visible to
  /// every rank after it. Collective over the node; failure::mismatch when another rank made
  /// another call (e.g. destroy()).
  void fence();
  /// As fence(), synchronizing only stream s (cheaper when the window's copies go to s).
  void fence(stream_view s);
  /// Closes every peer's segment, waits until every rank of the node has closed this rank's,
  /// then frees it: no rank frees memory another still maps. Collective over the node; the
  /// window is empty afterwards, whatever it throws. After a failure the segment is freed
  /// anyway; memarea defers the driver's free while another process has it open. Where that
  /// free fails (ipc::free_policy::refuse: busy), the segment goes to memarea's release-failure
  /// record (memarea/error.hpp, take_release_failures) for the caller to free later.
  void destroy();

 private:
  friend struct detail::window_access;
  /// Allocates this rank's segment, given its node rank; what it throws fails the collective.
  using allocate_fn = std::function<void*(int node_rank)>;
  /// Frees the segment.
  using release_fn = std::function<void(void*, std::size_t)>;
  [[gnu::visibility("hidden")]] shared_window(MPI_Comm comm, std::size_t bytes,
                                              const allocate_fn& allocate, release_fn release,
                                              const options& o);
  /// Frees the segment now (a failure goes to the release-failure record).
  [[gnu::visibility("hidden")]] void free_segment() noexcept;
  release_fn release_;
  void* segment_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace memarea::mpi

#pragma GCC visibility pop
