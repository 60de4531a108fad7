// Which of memarea's shared-memory objects belong to a live process, without pids.
//
// A process that creates named objects first makes its lease, "/memarea-lease-<owner>" (owner:
// 16 random hex digits), and holds an open-file-description write lock on it (F_OFD_SETLK) for
// its lifetime. Every object it creates afterwards is named "/memarea-<kind>-<owner>-<random>".
// The kernel drops the lock when the process dies, however it dies (exit, SIGKILL, abort,
// _exit), and the lock belongs to the file, not to a pid: it reads the same from every PID
// namespace that shares /dev/shm, and a reused pid cannot pass for the dead owner.
//
// The owner's lock is on the lease's first byte. A sweep removes the objects of owners whose
// lease nobody holds. It takes the owner's byte itself while it removes them, so an owner that
// is still making its lease either finds the lock taken (and draws another name) or its name
// gone (and draws another): the sweep never removes a live owner's objects. A sweep first
// takes the lease's second byte, so that two sweeps of one dead owner take turns: when a sweep
// returns, what it found of a dead owner is gone (not left to a sweep still at work). A
// liveness test takes the second byte too before it reads the first, so that it never takes a
// sweep at work on a dead owner for the owner.
#pragma once

#include "base/lease_table.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memarea::detail::lease {

/// This process's owner (the random part of its lease's name), making the lease on the first
/// call; 0, with *err set to an errno value, when it cannot be made. A child of fork() makes
/// its own on its first call (the parent's lease is not the child's). It does not start the
/// background thread: its callers do, where they need it (base/housekeeper.hpp).
std::uint64_t own(int* err) noexcept;

/// The bytes at the end of every object memarea makes in /dev/shm (its lease too): a magic and
/// the object's own name. The sweep removes only files that carry the stamp of their name, so a
/// file merely named like memarea's is never removed.
inline constexpr std::size_t kStampBytes = 4096;
/// Makes the object `name` ("/memarea-..."; O_EXCL, mode 0600) of `bytes` bytes followed by
/// its stamp (at offset `bytes`). Returns its descriptor, or -errno (-EEXIST: the name is taken,
/// never ours to use; nothing is left behind on failure).
int create_object(const std::string& name, std::size_t bytes) noexcept;
/// Whether fd is a regular file of this user, of no other's access (mode 0600 or less), that
/// ends in the stamp of `name` (with or without the leading '/'). Reads it with pread: a file
/// cut short cannot fault.
bool stamped(int fd, std::string_view name) noexcept;
/// This process's owner if it has made its lease already, else 0 (makes nothing).
std::uint64_t current() noexcept;

/// Writes rows (at most lease_table::kMaxRows) into this process's usage table, the first
/// lease_table::kBytes of its lease (base/lease_table.hpp); false when it has no lease yet.
bool publish_usage(const lease_table::row* rows, std::uint32_t n) noexcept;

/// The owners of every lease in /dev/shm (any user's; opening one is another matter).
std::vector<std::uint64_t> owners();

/// As open(owner), but also a lease of another user when `any_user` (root reading every
/// process): still a regular file of no other's access, never a link; and one that ends in the
/// stamp of its name (another name of a lease is refused, -EPERM). Another user's lease is
/// opened read-only: a report takes no lock on it (test() only looks at its locks).
int open_for_reading(std::uint64_t owner, bool any_user) noexcept;

/// Reads the usage table of the lease behind fd (lease_table::decode of two equal reads);
/// nullopt, with *why, when it has none this process can read. Its uid is the file's owner as
/// this process sees it, whatever the table says.
std::optional<lease_table::decoded> read_table(int fd, std::string* why) noexcept;

/// "/memarea-<kind>-<owner>-<random>": owner as 16 hex digits, random as `digits` (1 to 16).
std::string object_name(std::string_view kind, std::uint64_t owner, std::uint64_t random,
                        int digits);

/// The owner inside a memarea object's name ("memarea-<kind>-<owner>..."; with or without the
/// leading '/'), or 0 when the name is not one.
std::uint64_t owner_of(std::string_view name) noexcept;

/// Opens owner's lease to test it: a descriptor (the caller closes it), or -errno. -ENOENT: no
/// lease of that name (its owner has gone, or never was). Anything but a regular file of this
/// user is refused (-EPERM): a lease of another user is never trusted nor touched.
int open(std::uint64_t owner) noexcept;

/// What a lease's lock says.
enum class holder { alive, gone, unknown };

/// Whether the process that owns the lease behind fd (opened for writing) still lives
/// (F_OFD_GETLK), read while holding the lease's sweep byte so that a sweep removing a dead
/// owner's objects is not taken for the owner; unknown if the kernel cannot say, or a sweep
/// holds the lease for longer than a sweep waits for another. With waits_left, it waits at most
/// that many times (as many as a sweep does at most) and takes them off: a reader of many leases
/// bounds its waiting over all of them, however many hold their sweep byte. A descriptor open
/// read-only (another user's lease, open_for_reading) takes no lock: it only looks, and a held
/// sweep byte is unknown at once.
holder test(int fd, int* waits_left = nullptr) noexcept;

/// test(open(owner)): gone when the lease does not exist.
holder test_owner(std::uint64_t owner) noexcept;

/// The lease's byte that a sweep locks (F_OFD_SETLK, write) while it decides about the lease and
/// removes its owner's objects; the owner's lock is on byte 0.
inline constexpr long kSweepLockByte = 1;
/// How many times a sweep waits, 2 ms each, for another sweep working on one lease.
inline constexpr int kSweepWaits = 50;

/// What one sweep found.
struct sweep_report {
  std::vector<std::string> removed;  ///< names removed (without the leading '/')
  std::size_t live_owners = 0;       ///< owners whose lease is held: left alone
  std::size_t left_alone = 0;        ///< objects of other users, or whose lease could not be read
  std::size_t busy = 0;  ///< dead owners another sweep held on to for too long: the next sweep's
};

/// Removes from /dev/shm the objects of owners whose lease nobody holds, and the objects whose
/// lease is gone. Never removes this process's objects, another user's, or those of a live
/// owner. With dry_run, lists what it would remove and removes nothing. Reads /dev/shm: never
/// called inside a user's memory call (memarea's background thread and `memarea ipc gc` run it).
sweep_report sweep(bool dry_run = false);

}  // namespace memarea::detail::lease
