// The IPC handle's wire format: 128 bytes that cross from one process to another, and so are
// read as untrusted (parse checks every field it can without the exporter; the importer checks
// the rest against the exporter's segment and the driver).
#pragma once

#include "driver/driver.hpp"

#include <memarea/ipc.hpp>

#include <cstdint>
#include <string>

namespace memarea::detail::ipc_internal {

/// The 128 bytes of memarea::ipc::handle, as laid out on the wire (little-endian hosts only:
/// handles travel between processes of one machine).
struct wire {
  std::uint32_t magic;            ///< kHandleMagic
  std::uint16_t version;          ///< kHandleVersion
  std::uint16_t reserved;         ///< 0
  unsigned char native[64];       ///< the driver's handle of the whole (base) allocation
  std::uint64_t offset;           ///< of the exported pointer from the driver's base
  std::uint64_t owner;            ///< the exporter's lease (base/lease.hpp): who it is
  std::int32_t device;            ///< the memory's device in the exporting process
  std::int32_t pid;               ///< the exporting process, in its PID namespace (messages only)
  std::uint64_t buffer_id;        ///< the exporter's id of the buffer (unique per process lifetime)
  std::uint64_t segment;          ///< the random part of the exporter's segment name
  std::uint32_t slot;             ///< the buffer's slot in the exporter's shared segment
  std::uint32_t backend;          ///< hash of the backend's name
  std::uint64_t checksum;         ///< of the 120 bytes before it
};
static_assert(sizeof(wire) == 128, "the wire format is 128 bytes");

constexpr std::uint32_t kHandleMagic = 0x4849414du;  // "MAIH"
/// Version 3: the exporter is named by its lease (no pid or start time: liveness works across
/// PID namespaces and pid reuse), and its segment's name by the lease and a random part.
/// Version 2 (pid, start time and a random part) and version 1 are refused.
constexpr std::uint16_t kHandleVersion = 3;

/// The checksum of a wire's first 120 bytes.
std::uint64_t checksum(const wire& w) noexcept;
/// The wire inside h after checking magic, version, checksum and field ranges; invalid_handle
/// (with the reason) otherwise. Never reads outside h.
wire parse(const ipc::handle& h);
/// parse() of the 128 bytes at bytes (the C API's handle, without a copy into ipc::handle).
wire parse_bytes(const unsigned char (&bytes)[128]);
/// The driver's native handle inside a memarea handle (the bench's raw baseline).
ipc_native_handle native_of(const ipc::handle& h);
/// The active backend's name hashed (handles of another backend are refused).
std::uint32_t backend_tag();

/// The shared segment's name of an exporting process: "/memarea-ipc-<owner>-<segment>".
std::string segment_name(std::uint64_t owner, std::uint64_t segment);
/// A digest of a driver handle's bytes (the exporter's segment keeps it per exported buffer, and
/// an importer compares the handle's).
std::uint64_t native_digest(const unsigned char (&native)[64]) noexcept;

}  // namespace memarea::detail::ipc_internal
