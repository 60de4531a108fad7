// Private to the sim driver's files (src/driver/sim/sim_*.cpp): what more than one of them uses.
//
// The sim driver is one class (sim_driver.hpp) whose members are defined in one file per
// concern: sim_driver.cpp (construction, devices, peer access, the shared helpers),
// sim_memory.cpp (allocation and frees), sim_streams.cpp (streams, events, copies),
// sim_fork.cpp (fork() without exec), sim_ipc.cpp (legacy IPC handles and shareable memory),
// sim_managed.cpp (managed-memory prefetch, advice and attributes). These helpers were one
// file's private functions; they are declared here so that each file reaches the same one.
#pragma once

#include "driver/sim/sim_driver.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

namespace memarea::detail::sim {

/// The sim's own error names, so messages show which layer refused ("SIM_ERROR_...").
const char* native_name(errc c) noexcept;

/// A failed status with the sim's error name and a formatted explanation.
template <class... A>
dstatus fail(errc c, fmt::format_string<A...> f, A&&... args) {
  dstatus s;
  s.code = c;
  s.native = 0;
  s.native_name = native_name(c);
  s.detail = fmt::format(f, std::forward<A>(args)...);
  return s;
}

/// Translates an errno from a system call; anything not clearly a resource shortage is unknown,
/// never success.
dstatus from_errno(int e, const char* call);

/// Rounds up to kPage; false on overflow (callers report out_of_memory, as a huge size would).
inline bool round_page(size_t n, size_t* out) {
  if (n > std::numeric_limits<size_t>::max() - (kPage - 1)) return false;
  *out = (n + kPage - 1) / kPage * kPage;
  return true;
}

/// A process-wide unique 64-bit id. Random start so that several processes (or a process reusing
/// a dead one's pid) never produce the same shm name.
std::uint64_t next_id();

/// The bytes of a sim IPC handle. 64 bytes, so it fits ipc_native_handle.
struct ipc_payload {
  char magic[4];
  std::int32_t device;  ///< exporting device
  std::uint64_t size;   ///< allocation size
  char name[48];        ///< shm name, NUL-terminated: /memarea-sim-<owner>-<random>
};
static_assert(sizeof(ipc_payload) <= sizeof(ipc_native_handle::bytes));
inline constexpr char kIpcMagic[4] = {'M', 'S', 'I', 'M'};
inline constexpr const char* kShmPrefix = "/memarea-sim-";
/// Hex digits of the random part of a device allocation's name (after the owner's 16): the
/// name must fit ipc_payload::name.
inline constexpr int kNameRandomDigits = 16;

inline std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// --- sim_memory.cpp ----------------------------------------------------------------------------

/// Words for an origin in messages.
const char* origin_name(origin o);

/// Removes the allocation whose base is ptr and whose origin is one of `accepted`, after waiting
/// for all queued work (so no copy still touches it), and gives its bytes back to its device in
/// the same critical section; *out gets the entry to unmap. Validates before waiting, so a bad
/// pointer changes and waits for nothing. With decrement_refs only the last reference removes.
dstatus take_allocation(std::mutex& m, std::map<std::uintptr_t, allocation>& allocations,
                        std::vector<size_t>& used, const void* ptr,
                        std::initializer_list<origin> accepted, const char* want,
                        const std::function<void()>& sync, allocation* out, bool* erased,
                        bool decrement_refs);

// --- sim_fork.cpp ------------------------------------------------------------------------------

/// Every live sim driver, for the fork handlers (the constructor and destructor list and unlist
/// it). Never destroyed: a driver made during static initialisation may outlive any static.
extern std::mutex g_live_mutex;
std::vector<sim_driver*>& live_drivers();

}  // namespace memarea::detail::sim
