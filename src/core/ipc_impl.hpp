// Internals of inter-process sharing shared by src/core/ipc*.cpp, the C API and the bench.
#pragma once

#include "driver/driver.hpp"

#include <memarea/ipc.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memarea::detail::ipc_internal {

/// Registry records that IPC inserts carry these as area_device and kNoAreaFlags as
/// area_flags, so no area's munmap matches them and free_record's hook refuses them.
constexpr int kImportedSentinel = -1000;           ///< a legacy IPC mapping
constexpr int kShareableSentinel = -1001;          ///< shareable memory created here
constexpr int kShareableImportedSentinel = -1002;  ///< shareable memory imported from an fd
constexpr unsigned kNoAreaFlags = 0xffffffffu;

/// The 128 bytes of memarea::ipc::handle, as laid out on the wire (little-endian hosts only:
/// handles travel between processes of one machine).
struct wire {
  std::uint32_t magic;            ///< kHandleMagic
  std::uint16_t version;          ///< kHandleVersion
  std::uint16_t reserved;         ///< 0
  unsigned char native[64];       ///< the driver's handle of the whole (base) allocation
  std::uint64_t offset;           ///< of the exported pointer from the driver's base
  std::uint64_t nonce;            ///< the random part of the exporter's segment name
  std::int32_t device;            ///< the memory's device in the exporting process
  std::int32_t pid;               ///< the exporting process
  std::uint64_t buffer_id;        ///< the registry record's id (unique per process lifetime)
  std::uint64_t token;            ///< the exporter's start time (pid reuse detection)
  std::uint32_t slot;             ///< the buffer's slot in the exporter's shared segment
  std::uint32_t backend;          ///< hash of the backend's name
  std::uint64_t checksum;         ///< of the 120 bytes before it
};
static_assert(sizeof(wire) == 128, "the wire format is 128 bytes");

constexpr std::uint32_t kHandleMagic = 0x4849414du;  // "MAIH"
/// Version 2: the allocation's size is no longer in the handle (the exporter's segment says it,
/// and the driver after the open); the segment's name has a random part. Version 1 is refused.
constexpr std::uint16_t kHandleVersion = 2;

/// The checksum of a wire's first 120 bytes.
std::uint64_t checksum(const wire& w) noexcept;
/// The wire inside h after checking magic, version, checksum and field ranges; invalid_handle
/// (with the reason) otherwise. Never reads outside h.
wire parse(const ipc::handle& h);
/// The driver's native handle inside a memarea handle (the bench's raw baseline).
ipc_native_handle native_of(const ipc::handle& h);

/// This process's start time in clock ticks since boot (from /proc/self/stat); 0 if unknown.
std::uint64_t self_token();
/// Whether pid runs and (token != 0) started at token: false for exited, zombie or reused pids.
bool process_alive(std::int32_t pid, std::uint64_t token);
/// The shared segment's name of an exporting process: its pid and start time, then a random
/// part (nonce) that another user cannot guess.
std::string segment_name(std::int32_t pid, std::uint64_t token, std::uint64_t nonce);
/// A digest of a driver handle's bytes (the exporter's segment keeps it per exported buffer, and
/// an importer compares the handle's).
std::uint64_t native_digest(const unsigned char (&native)[64]) noexcept;

/// (owner pid, buffer id) of the closed mappings held in this process's import cache, most
/// recently used first (for tests: which mapping the LRU bound evicted).
std::vector<std::pair<std::int32_t, std::uint64_t>> cached_mapping_keys();

}  // namespace memarea::detail::ipc_internal
