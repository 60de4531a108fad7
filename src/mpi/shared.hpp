// What share() and shared_window hold: the node group and every node peer's opened memory.
#pragma once

#include "group.hpp"

#include <memarea/memarea.h>
#include <memarea/mpi.hpp>
#include <memarea/pointer.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace memarea::mpi::detail {

/// Every node rank's memory as this process sees it, indexed by node rank.
struct imports {
  std::unique_ptr<group> g;
  std::vector<void*> ptrs;         ///< valid in this process (this rank's own: its memory)
  std::vector<std::size_t> sizes;  ///< bytes from the pointer to the end of its allocation
  std::vector<int> devices;        ///< this process's ordinal of each memory's device (-1: none)
  std::vector<bool> access;        ///< whether this rank's device reaches it directly
  std::vector<bool> opened;        ///< whether ptrs[r] is an ipc::open of ours to close
  imports() = default;
  imports(const imports&) = delete;
  imports& operator=(const imports&) = delete;
  /// Closes what is still open (errors on stderr: nothing else can be done with them here).
  ~imports();
  /// Closes every import of this process (errors on stderr).
  void close_all() noexcept;
};

/// The collective behind share() and shared_window: joins the node, calls `local` for this
/// rank's memory (what it throws travels to every rank), exchanges handles and opens them.
/// window_bytes: a window's bytes_per_rank, which must be the same on every rank of the node
/// (nullopt: share(), whose sizes may differ, with a handle step of its own kind). Throws
/// collective_error, every rank alike; nothing stays open then, on any rank.
std::unique_ptr<imports> make_imports(MPI_Comm comm, const options& o, const char* what,
                                      std::optional<std::size_t> window_bytes,
                                      const std::function<const void*(const group&)>& local);

/// The bytes of a peer's memory that this process may use: `claimed`, what the peer said, once
/// checked against the mapping this process opened (`mapped`: memarea::lookup of the import
/// `p`). Throws invalid_handle naming `who` when the peer claims more than the mapping holds
/// from p to its end, or p lies outside it.
std::size_t checked_peer_size(std::uint64_t claimed, const allocation_info& mapped,
                              const void* p, const std::string& who);

/// Closes this process's imports, then waits for every rank of the node to have closed its own.
void close_imports(imports& im, const char* what);

/// Throws memarea::error for a failed C call of memarea (its status and message).
inline void require_ok(memarea_status s, const char* what) {
  if (s == MEMAREA_SUCCESS) return;
  throw error(static_cast<errc>(s), fmt::format("{}: {}", what, memarea_last_error_message()));
}

}  // namespace memarea::mpi::detail
