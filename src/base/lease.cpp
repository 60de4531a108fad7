#include "base/lease.hpp"

#include "base/fork_safety.hpp"
#include "base/random_name.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <new>

namespace memarea::detail::lease {

namespace {

/// Where glibc's shm_open keeps its objects (fixed since glibc 2.34; Debian 12 has 2.36).
constexpr const char* kShmDir = "/dev/shm";
constexpr std::string_view kPrefix = "memarea-";
constexpr std::string_view kLeaseKind = "lease";
/// How long each of a sweep's waits for another sweep working on one lease lasts.
constexpr long kSweepWaitNs = 2'000'000;

/// This process's lease; 0 / -1 until made. Guarded by g_lock.
struct own_lease {
  std::uint64_t owner = 0;
  int fd = -1;
  pid_t pid = 0;
  lease_table::layout* table = nullptr;  ///< what its usage table holds (heap: written with pwrite)
};

/// Guards g_own. A plain mutex, initialised at compile time: memarea may be called from another
/// library's static initialiser, before this file's objects are constructed. fork()'s prepare
/// takes it (lease_fork), so that a child never inherits a lease half-made by another thread
/// (whose descriptor it would keep open, holding the parent's lock past its death). Inside it
/// there are only system calls.
pthread_mutex_t g_lease_mutex = PTHREAD_MUTEX_INITIALIZER;
struct lease_lock {
  lease_lock() noexcept { pthread_mutex_lock(&g_lease_mutex); }
  ~lease_lock() { pthread_mutex_unlock(&g_lease_mutex); }
  lease_lock(const lease_lock&) = delete;
  lease_lock& operator=(const lease_lock&) = delete;
};
constinit own_lease g_own;
constinit std::atomic<std::uint64_t> g_current{0};

/// The inode of this process's PID namespace, 0 when /proc cannot say.
std::uint64_t pid_namespace() noexcept {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

/// Writes who this process is into a new lease's table; null when out of memory. Written to the
/// file with pwrite, never through a mapping: a file another process cut short cannot fault us.
lease_table::layout* make_table(int fd) noexcept {
  auto* t = new (std::nothrow) lease_table::layout{};
  if (!t) return nullptr;
  char comm[17] = {};
  if (const int c = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC); c >= 0) {
    const ssize_t n = read(c, comm, 16);
    ::close(c);
    for (ssize_t i = 0; i < n; ++i)
      if (comm[i] == '\n') comm[i] = '\0';
  }
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const auto start = static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ull +
                     static_cast<std::uint64_t>(now.tv_nsec);
  lease_table::init(*t, static_cast<std::int32_t>(getpid()), pid_namespace(),
                    static_cast<std::uint32_t>(geteuid()), start, comm);
  (void)!pwrite(fd, t, sizeof *t, 0);
  return t;
}

/// The child's lease is its own: it closes the parent's descriptor (which would otherwise keep
/// the parent's lock alive after the parent dies) and makes a new lease when it needs one.
struct lease_fork final : fork_participant {
  lease_fork() noexcept : fork_participant(lock_rank::lease) {}
  void fork_prepare() noexcept override { pthread_mutex_lock(&g_lease_mutex); }
  void fork_parent() noexcept override { pthread_mutex_unlock(&g_lease_mutex); }
  void fork_child() noexcept override {
    pthread_mutex_init(&g_lease_mutex, nullptr);
    if (g_own.fd >= 0) ::close(g_own.fd);
    // The parent's table stays the parent's: the child never writes it.
    delete g_own.table;
    g_own = own_lease{};
    g_current.store(0);
  }
};
lease_fork g_lease_fork;

std::string hex16(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// (Names are built with snprintf: GCC 12 at -O3 warns falsely (-Wrestrict) on chains of
// std::string operator+.)
std::string lease_name(std::uint64_t owner) {
  char b[64];
  std::snprintf(b, sizeof b, "/memarea-lease-%016llx", static_cast<unsigned long long>(owner));
  return b;
}

// A lease's two lock bytes. The owner holds kOwnerByte for its lifetime. A sweep holds
// kSweepByte while it decides about the lease and removes what it finds, so that two sweeps
// (two processes' background threads, `memarea ipc gc`) never work on one dead owner at once:
// the second waits for the first instead of mistaking the first's lock for a live owner's.
constexpr off_t kOwnerByte = 0;
constexpr off_t kSweepByte = kSweepLockByte;

flock byte_lock(short type, off_t byte) {
  flock fl{};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = byte;
  fl.l_len = 1;
  fl.l_pid = 0;  // required for the OFD commands
  return fl;
}

/// Removes this process's lease at exit (its lock goes with the process anyway; the name would
/// wait for a sweep). Only in the process that made it: a fork child's is its own.
void remove_own_lease_at_exit() {
  lease_lock lock;
  if (g_own.owner != 0 && g_own.pid == getpid()) shm_unlink(lease_name(g_own.owner).c_str());
}

/// What a stamp holds: a magic, then the object's name without its leading '/'.
constexpr char kStampMagic[16] = "memarea object\n";
constexpr std::size_t kStampName = 96;
struct stamp {
  char magic[16];
  char name[kStampName];
};
static_assert(sizeof(stamp) <= kStampBytes);

std::string_view bare(std::string_view name) {
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  return name;
}

bool same_file(int fd, const std::string& name) {
  struct stat mine {}, named {};
  if (fstat(fd, &mine) != 0) return false;
  char path[128];
  std::snprintf(path, sizeof path, "%s%s", kShmDir, name.c_str());
  if (lstat(path, &named) != 0) return false;
  return mine.st_ino == named.st_ino && mine.st_dev == named.st_dev;
}

}  // namespace

int create_object(const std::string& name, std::size_t bytes) noexcept {
  const std::string_view b = bare(name);
  if (b.size() >= kStampName) return -ENAMETOOLONG;
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  stamp s{};
  std::memcpy(s.magic, kStampMagic, sizeof s.magic);
  std::memcpy(s.name, b.data(), b.size());
  const off_t at = static_cast<off_t>(bytes);
  if (ftruncate(fd, at + static_cast<off_t>(kStampBytes)) != 0 ||
      pwrite(fd, &s, sizeof s, at) != static_cast<ssize_t>(sizeof s)) {
    const int e = errno ? errno : EIO;
    ::close(fd);
    shm_unlink(name.c_str());
    return -e;
  }
  return fd;
}

namespace {
/// Whether the regular file fd (st: its fstat) ends in the stamp of name, whoever's it is.
bool ends_in_stamp(int fd, const struct stat& st, std::string_view name) noexcept {
  const std::string_view b = bare(name);
  if (b.size() >= kStampName || st.st_size < static_cast<off_t>(kStampBytes)) return false;
  stamp s{};
  if (pread(fd, &s, sizeof s, st.st_size - static_cast<off_t>(kStampBytes)) !=
      static_cast<ssize_t>(sizeof s))
    return false;
  char want[kStampName] = {};
  std::memcpy(want, b.data(), b.size());
  return std::memcmp(s.magic, kStampMagic, sizeof s.magic) == 0 &&
         std::memcmp(s.name, want, sizeof want) == 0;
}
}  // namespace

bool stamped(int fd, std::string_view name) noexcept {
  struct stat st {};
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
         (st.st_mode & 077) == 0 && ends_in_stamp(fd, st, name);
}

std::uint64_t own(int* err) noexcept {
  if (std::uint64_t o = g_current.load(std::memory_order_acquire)) return o;
  int failure = EEXIST;
  {
    lease_lock lock;
    if (g_own.owner != 0) return g_own.owner;
    for (int attempt = 0; attempt < 16; ++attempt) {
      const std::uint64_t owner = random_u64();
      const std::string name = lease_name(owner);
      // O_EXCL: a name that exists is someone else's (never ours to use or remove).
      const int fd = create_object(name, lease_table::kBytes);
      if (fd < 0) {
        failure = -fd;
        if (failure == EEXIST) continue;
        break;
      }
      flock fl = byte_lock(F_WRLCK, kOwnerByte);
      // A sweep that found the new lease unlocked holds its lock while it removes it: draw
      // another name. If it removed it before we locked, the name is gone or another file's.
      if (fcntl(fd, F_OFD_SETLK, &fl) != 0 || !same_file(fd, name)) {
        failure = errno ? errno : EEXIST;
        ::close(fd);
        continue;
      }
      static const bool registered = [] { return std::atexit(remove_own_lease_at_exit) == 0; }();
      (void)registered;
      g_own = own_lease{owner, fd, getpid(), make_table(fd)};
      g_current.store(owner, std::memory_order_release);
      break;
    }
  }
  if (std::uint64_t o = g_current.load(std::memory_order_acquire)) return o;
  if (err) *err = failure;
  return 0;
}

std::uint64_t current() noexcept { return g_current.load(std::memory_order_acquire); }

bool publish_usage(const lease_table::row* rows, std::uint32_t n) noexcept {
  lease_lock lock;
  if (!g_own.table || g_own.fd < 0) return false;
  lease_table::publish(*g_own.table, rows, n);
  return pwrite(g_own.fd, g_own.table, sizeof *g_own.table, 0) ==
         static_cast<ssize_t>(sizeof *g_own.table);
}

std::vector<std::uint64_t> owners() {
  std::vector<std::uint64_t> out;
  DIR* d = opendir(kShmDir);
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    const std::uint64_t o = owner_of(name);  // 0 unless "memarea-<kind>-<owner>..."
    if (o != 0 && name.substr(kPrefix.size(), kLeaseKind.size() + 1) == "lease-") out.push_back(o);
  }
  closedir(d);
  return out;
}

int open_for_reading(std::uint64_t owner, bool any_user) noexcept {
  if (owner == 0) return -ENOENT;
  const std::string name = lease_name(owner);
  char path[128];
  std::snprintf(path, sizeof path, "%s%s", kShmDir, name.c_str());
  // Read-only first: another user's lease is only looked at, never locked or written.
  int fd = ::open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -errno;
  // The stamp too: another name (a hard link) of some process's lease is not a second lease.
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 ||
      (!any_user && st.st_uid != geteuid()) || !ends_in_stamp(fd, st, name)) {
    ::close(fd);
    return -EPERM;
  }
  if (st.st_uid != geteuid()) return fd;
  // The user's own: read-write, so that test() takes the sweep byte as a sweep does. Still the
  // file checked above, or nothing.
  const int rw = ::open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  const int why = errno;
  ::close(fd);
  if (rw < 0) return -why;
  struct stat again {};
  if (fstat(rw, &again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino) {
    ::close(rw);
    return -EPERM;
  }
  return rw;
}

std::optional<lease_table::decoded> read_table(int fd, std::string* why) noexcept {
  try {
    // Read, never mapped: a file another process cut short cannot fault a read. Two equal
    // reads make one that no write of the owner tore.
    std::vector<unsigned char> a(lease_table::kBytes), b(lease_table::kBytes);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const ssize_t n = pread(fd, a.data(), a.size(), 0);
      if (n < 0) {
        if (why) *why = std::strerror(errno);
        return std::nullopt;
      }
      const ssize_t m = pread(fd, b.data(), b.size(), 0);
      if (m != n || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(n)) != 0) continue;
      auto d = lease_table::decode(a.data(), static_cast<std::size_t>(n), why);
      // The table's uid is what its writer says (and in its own user namespace); the file's
      // owner, as this process sees it, is what the kernel says.
      struct stat st {};
      if (d && fstat(fd, &st) != 0) {
        if (why) *why = std::strerror(errno);
        return std::nullopt;
      }
      if (d) d->uid = static_cast<std::uint32_t>(st.st_uid);
      return d;
    }
    if (why) *why = "usage table changing on every read";
  } catch (...) {
    if (why) *why = "out of memory";
  }
  return std::nullopt;
}

std::string object_name(std::string_view kind, std::uint64_t owner, std::uint64_t random,
                        int digits) {
  if (digits < 1) digits = 1;
  if (digits > 16) digits = 16;
  const std::string tail = hex16(random);
  char b[128];
  std::snprintf(b, sizeof b, "/memarea-%.*s-%016llx-%s", static_cast<int>(kind.size()),
                kind.data(), static_cast<unsigned long long>(owner),
                tail.c_str() + (16 - digits));
  return b;
}

std::uint64_t owner_of(std::string_view name) noexcept {
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  if (name.substr(0, kPrefix.size()) != kPrefix) return 0;
  name.remove_prefix(kPrefix.size());
  const std::size_t dash = name.find('-');
  if (dash == std::string_view::npos || dash == 0) return 0;
  for (char c : name.substr(0, dash))
    if (!(c >= 'a' && c <= 'z')) return 0;
  name.remove_prefix(dash + 1);
  if (name.size() < 16 || (name.size() > 16 && name[16] != '-')) return 0;
  std::uint64_t v = 0;
  for (char c : name.substr(0, 16)) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return 0;
    v = v << 4 | static_cast<std::uint64_t>(d);
  }
  return v;
}

int open(std::uint64_t owner) noexcept {
  if (owner == 0) return -ENOENT;
  char path[128];
  std::snprintf(path, sizeof path, "%s%s", kShmDir, lease_name(owner).c_str());
  // O_NONBLOCK: a FIFO planted under the name must not block us; O_NOFOLLOW: nor a symlink.
  const int fd = ::open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -errno;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    ::close(fd);
    return -EPERM;
  }
  return fd;
}

namespace {

/// test() for a descriptor that may not lock: the sweep byte held is unknown (a sweep at work
/// would make a dead owner look alive), else the owner's byte says. A sweep that starts between
/// the two looks can make a dead owner read alive this once: such descriptors serve reports
/// (open_for_reading), never a decision to remove or keep anything.
holder look(int fd) noexcept {
  flock sweep_fl = byte_lock(F_WRLCK, kSweepByte);
  if (fcntl(fd, F_OFD_GETLK, &sweep_fl) != 0 || sweep_fl.l_type != F_UNLCK)
    return holder::unknown;
  flock fl = byte_lock(F_WRLCK, kOwnerByte);
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return holder::unknown;
  return fl.l_type == F_UNLCK ? holder::gone : holder::alive;
}

}  // namespace

holder test(int fd, int* waits_left) noexcept {
  const int mode = fcntl(fd, F_GETFL);
  if (mode < 0) return holder::unknown;
  if ((mode & O_ACCMODE) == O_RDONLY) return look(fd);
  // A sweep holds the owner's byte too, while it removes a dead owner's objects, and it takes
  // the sweep byte first: holding the sweep byte, we read the owner's byte as the owner's alone
  // (not a sweep's, which would make a dead owner look alive). Waited for as one sweep waits for
  // another; under the lease mutex, as the sweep, so that a child of fork() never inherits a
  // descriptor of ours that holds a lock on someone's lease.
  const flock sweep_fl = byte_lock(F_WRLCK, kSweepByte);
  const flock unlock_fl = byte_lock(F_UNLCK, kSweepByte);
  for (int attempt = 0;; ++attempt) {
    {
      lease_lock lock;
      flock take = sweep_fl;
      if (fcntl(fd, F_OFD_SETLK, &take) == 0) {
        flock fl = byte_lock(F_WRLCK, kOwnerByte);
        const int rc = fcntl(fd, F_OFD_GETLK, &fl);
        flock release = unlock_fl;
        (void)fcntl(fd, F_OFD_SETLK, &release);
        if (rc != 0) return holder::unknown;
        return fl.l_type == F_UNLCK ? holder::gone : holder::alive;
      }
      if (errno != EAGAIN && errno != EACCES) return holder::unknown;
    }
    if (attempt == kSweepWaits || (waits_left && *waits_left <= 0)) return holder::unknown;
    if (waits_left) --*waits_left;
    timespec pause{0, kSweepWaitNs};
    nanosleep(&pause, nullptr);
  }
}

holder test_owner(std::uint64_t owner) noexcept {
  const int fd = open(owner);
  if (fd == -ENOENT) return holder::gone;
  if (fd < 0) return holder::unknown;
  const holder h = test(fd);
  ::close(fd);
  return h;
}

sweep_report sweep(bool dry_run) {
  sweep_report report;
  DIR* d = opendir(kShmDir);
  if (!d) return report;
  const int dir = dirfd(d);
  // owner -> its objects' names (the lease's apart)
  std::map<std::uint64_t, std::vector<std::string>> objects;
  while (dirent* e = readdir(d)) {
    const std::string_view name = e->d_name;
    const std::uint64_t owner = owner_of(name);
    if (owner == 0) continue;
    if (name.substr(kPrefix.size(), kLeaseKind.size() + 1) == "lease-") {
      objects[owner];  // an owner with no objects: its lease alone
      continue;
    }
    objects[owner].emplace_back(name);
  }
  const std::uint64_t self = current();
  const uid_t me = geteuid();
  // Removes `name` only if it is what memarea made under that name: a regular file of this
  // user carrying the stamp of its name (never a link, never a file merely named like ours),
  // and still the file that was checked when it is unlinked.
  auto remove_if_stamped = [&](const std::string& name, int known_fd = -1) {
    const int fd = known_fd >= 0
                       ? known_fd
                       : openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    bool removed = false;
    struct stat checked {}, now {};
    if (fd >= 0 && stamped(fd, name) && fstat(fd, &checked) == 0 &&
        fstatat(dir, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
        checked.st_ino == now.st_ino && checked.st_dev == now.st_dev)
      removed = dry_run || unlinkat(dir, name.c_str(), 0) == 0;
    if (fd >= 0 && known_fd < 0) ::close(fd);
    if (removed) report.removed.push_back(name);
    else ++report.left_alone;
    return removed;
  };
  auto remove_all = [&](const std::vector<std::string>& names) {
    for (const auto& n : names) (void)remove_if_stamped(n);
  };
  for (auto& [owner, names] : objects) {
    if (owner == self) continue;
    const std::string lease = lease_name(owner).substr(1);
    // The lease's sweep lock is held only for as long as another sweep removes a few names:
    // wait for it a little, and leave the owner to the next sweep if it takes longer.
    for (int attempt = 0;; ++attempt) {
      enum { done, wait_for_other_sweep } outcome = done;
      {
        // Under the lease mutex, which fork() takes first: a child never inherits a
        // descriptor of ours that holds a lock on someone's lease.
        lease_lock lock;
        const int fd = openat(dir, lease.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct stat st {};
        flock sweep_fl = byte_lock(F_WRLCK, kSweepByte);
        flock owner_fl = byte_lock(F_WRLCK, kOwnerByte);
        if (fd < 0) {
          if (errno != ENOENT) report.left_alone += names.size() + 1;
          // No lease: its owner removed it at exit (or a sweep did) and died before removing
          // these. An owner makes its lease before any object, so none of these is a live one's.
          else remove_all(names);
        } else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != me ||
                   !stamped(fd, lease)) {
          report.left_alone += names.size() + 1;
        } else if (fcntl(fd, F_OFD_SETLK, &sweep_fl) != 0) {
          outcome = wait_for_other_sweep;
        } else if (fcntl(fd, F_OFD_SETLK, &owner_fl) != 0) {
          ++report.live_owners;  // held: its owner lives
        } else {
          // Ours now: an owner still making this lease fails to lock it and draws another name.
          remove_all(names);
          // Another sweep may have removed the lease (and its objects) while we waited.
          if (same_file(fd, "/" + lease)) (void)remove_if_stamped(lease, fd);
        }
        if (fd >= 0) ::close(fd);  // drops our locks
      }
      if (outcome == done) break;
      if (attempt == kSweepWaits) {
        ++report.busy;
        break;
      }
      timespec pause{0, kSweepWaitNs};
      nanosleep(&pause, nullptr);
    }
  }
  closedir(d);
  return report;
}

}  // namespace memarea::detail::lease
