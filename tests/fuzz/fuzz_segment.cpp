// libFuzzer harness: the files in /dev/shm that memarea maps and that any process of the same
// user can change under it — an exporter's IPC segment, the sim backend's device memory, the
// exporter's lease. Each input starts a fresh exporting child (so that no input inherits the
// damage of another), then runs a list of operations against it: writes of a few bytes into its
// objects (pwrite: this process never maps them, so a fault can only come from memarea's own
// mappings), ftruncate to sizes around the real one, chmod, replacing an object with a
// look-alike, asking the child to export, free or read back its own buffers (its export path
// then meets its damaged segment), and on this side import opens, lookups, copies in both
// directions, closes, collect() and a small import cache.
//
// What must hold: every call returns or throws memarea::error; an opened pointer lies inside a
// mapping of sane size; nothing crashes, leaks or trips a sanitizer, in this process or in the
// child (a child killed by a signal, or exiting other than 0, aborts here so the input is kept).
//
// Run it with -handle_bus=0: libFuzzer otherwise installs its own SIGBUS handler after memarea
// could and does not chain to the one it replaces, so a file cut short under a mapping would be
// reported as a crash of the harness instead of reaching memarea's fault guard
// (base/fault_guard.hpp), which is what this harness tests. ASan's handler, installed before
// memarea's, still gets every SIGBUS that is not memarea's.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/error.hpp>
#include <memarea/ipc.hpp>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>
#include <string>
#include <vector>

#include "base/lease.hpp"
#include "core/ipc/ipc_segment.hpp"
#include "core/ipc/ipc_wire.hpp"
#include "driver/sim/sim_internal.hpp"

namespace {

namespace wf = memarea::detail::ipc_internal;
namespace lease = memarea::detail::lease;

constexpr int kMaxBuffers = 16;
constexpr std::size_t kMaxOps = 48;
constexpr std::size_t kSizes[] = {1, 100, 4096, 3 * 4096 + 100, 65536 + 7, std::size_t{1} << 20};
constexpr std::size_t kLargest = std::size_t{1} << 20;

/// What the child publishes, in a MAP_SHARED page made before the fork.
struct board {
  std::uint64_t owner;  ///< the child's lease
  std::uint32_t count;  ///< handles[0, count) were exported (some freed since)
  std::uint32_t live[kMaxBuffers];
  memarea::ipc::handle handles[kMaxBuffers];
};
board* g_board = nullptr;

// libFuzzer's -timeout timer interrupts this process's system calls with SIGALRM (a handler
// without SA_RESTART): each is repeated.
ssize_t read_byte(int fd, unsigned char* b, std::size_t n = 1) {
  ssize_t r;
  do r = read(fd, b, n);
  while (r < 0 && errno == EINTR);
  return r;
}
ssize_t write_bytes(int fd, const unsigned char* b, std::size_t n) {
  ssize_t r;
  do r = write(fd, b, n);
  while (r < 0 && errno == EINTR);
  return r;
}
pid_t reap(pid_t pid, int* status) {
  pid_t r;
  do r = waitpid(pid, status, 0);
  while (r < 0 && errno == EINTR);
  return r;
}

// --- the exporting child -----------------------------------------------------------------------

enum command : unsigned char { cmd_export = 'E', cmd_free = 'F', cmd_check = 'C', cmd_quit = 'Q' };
/// The child's answers.
enum answer : unsigned char { ok = 0, refused = 1 };

struct child_buffer {
  void* ptr = nullptr;
  std::size_t size = 0;
  bool pooled = false;
};

[[noreturn]] void child_main(int in, int out) {
  memarea::area a(0);
  memarea::pool p(a);
  std::vector<child_buffer> mine;
  auto make = [&](std::size_t size, bool pooled) -> unsigned char {
    if (g_board->count >= kMaxBuffers) return refused;
    child_buffer b;
    b.size = size;
    b.pooled = pooled;
    try {
      b.ptr = pooled ? p.allocate(size) : a.mmap(size);
    } catch (const memarea::error&) {
      return refused;
    }
    try {
      const auto h = memarea::ipc::export_handle(b.ptr);
      const std::uint32_t i = g_board->count;
      g_board->handles[i] = h;
      g_board->live[i] = 1;
      g_board->count = i + 1;
      mine.push_back(b);
      return ok;
    } catch (const memarea::error&) {
      // Its segment cut short or overwritten: a refusal, and the buffer goes back.
      try {
        pooled ? p.deallocate(b.ptr) : a.munmap(b.ptr, size);
      } catch (const memarea::error&) {
      }
      return refused;
    }
  };
  auto release = [&](std::size_t i) -> unsigned char {
    if (i >= mine.size() || !mine[i].ptr) return refused;
    child_buffer& b = mine[i];
    g_board->live[i] = 0;
    try {
      b.pooled ? p.deallocate(b.ptr) : a.munmap(b.ptr, b.size);
    } catch (const memarea::error&) {
      return refused;  // still ours then: the quit frees it again
    }
    b.ptr = nullptr;
    return ok;
  };
  auto check = [&]() -> unsigned char {
    // Reads every live buffer back through memarea: memory cut short must be an error, not a
    // fault.
    std::vector<unsigned char> host(kLargest);
    unsigned char r = ok;
    for (const auto& b : mine) {
      if (!b.ptr) continue;
      try {
        memarea::copy(host.data(), b.ptr, b.size);
      } catch (const memarea::error&) {
        r = refused;
      }
    }
    return r;
  };
  unsigned char r = ok;
  r |= make(3 * 4096 + 100, false);
  r |= make(4096, true);
  r |= make(100, true);
  g_board->owner = lease::current();
  if (write_bytes(out, &r, 1) != 1) _exit(3);
  for (;;) {
    unsigned char msg[2];
    if (read_byte(in, msg, 2) != 2) _exit(4);  // the parent went: nothing to clean for it
    switch (msg[0]) {
      case cmd_export:
        r = make(kSizes[(msg[1] >> 1) % std::size(kSizes)], msg[1] & 1);
        break;
      case cmd_free:
        r = release(msg[1] % kMaxBuffers);
        break;
      case cmd_check:
        r = check();
        break;
      case cmd_quit:
        for (std::size_t i = 0; i < mine.size(); ++i) release(i);
        try {
          p.destroy();
        } catch (const memarea::error&) {
        }
        r = ok;
        if (write_bytes(out, &r, 1) != 1) _exit(5);
        // _exit: exit() would run libFuzzer's atexit check ("fuzz target exited") in this
        // copy of the fuzzer. What the child leaves in /dev/shm is swept by the parent.
        _exit(0);
      default:
        _exit(6);
    }
    if (write_bytes(out, &r, 1) != 1) _exit(7);
  }
}

struct child {
  pid_t pid = -1;
  int to = -1;
  int from = -1;
  bool gone = false;  ///< quit already
};

child start_child() {
  std::memset(g_board, 0, sizeof *g_board);
  int down[2], up[2];
  if (pipe2(down, O_CLOEXEC) != 0 || pipe2(up, O_CLOEXEC) != 0) std::abort();
  const pid_t pid = fork();
  if (pid < 0) std::abort();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    close(down[1]);
    close(up[0]);
    try {
      child_main(down[0], up[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exporting child: unexpected exception: %s\n", e.what());
      _exit(8);
    }
  }
  close(down[0]);
  close(up[1]);
  child c{pid, down[1], up[0], false};
  unsigned char r = 0;
  if (read_byte(c.from, &r) != 1) {
    int status = 0;
    reap(pid, &status);
    std::fprintf(stderr, "exporting child did not start: %s %d\n",
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    std::abort();
  }
  return c;
}

/// Sends a command; true when the child did it.
bool ask(child& c, command what, unsigned char arg) {
  if (c.gone) return false;
  const unsigned char msg[2] = {what, arg};
  unsigned char r = 0;
  if (write_bytes(c.to, msg, 2) != 2 || read_byte(c.from, &r) != 1) {
    std::fprintf(stderr, "exporting child stopped answering\n");
    std::abort();
  }
  if (what == cmd_quit) c.gone = true;
  return r == ok;
}

/// Quits and reaps the child: it must have exited 0.
void finish(child& c) {
  if (!c.gone) ask(c, cmd_quit, 0);
  close(c.to);
  close(c.from);
  int status = 0;
  if (reap(c.pid, &status) != c.pid) std::abort();
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "exporting child died of signal %d (%s)\n", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    std::abort();
  }
  if (WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "exporting child exited with %d\n", WEXITSTATUS(status));
    std::abort();
  }
}

// --- the child's objects -----------------------------------------------------------------------

/// The child's objects in /dev/shm (names without '/'), with their sizes as first seen.
struct objects {
  std::uint64_t owner = 0;
  std::vector<std::string> names;
  std::map<std::string, off_t> size;
  bool stale = true;

  void scan() {
    stale = false;
    names.clear();
    DIR* d = opendir("/dev/shm");
    if (!d) return;
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("memarea-", 0) != 0 || lease::owner_of(n) != owner) continue;
      names.push_back(n);
      if (!size.count(n)) {
        struct stat sb {};
        size[n] = stat(("/dev/shm/" + n).c_str(), &sb) == 0 ? sb.st_size : 0;
      }
    }
    closedir(d);
    std::sort(names.begin(), names.end());
  }
  /// One of them (rescanned after the child made or freed some), or "" when there are none.
  std::string pick(unsigned char sel) {
    if (stale) scan();
    return names.empty() ? std::string() : names[sel % names.size()];
  }
  /// Removes what the child left: the sweep removes what still carries its stamp, this the rest
  /// (objects whose stamp an input overwrote are no longer provably memarea's to the sweep).
  void remove_all() {
    scan();
    for (const auto& n : names) shm_unlink(("/" + n).c_str());
  }
};

/// An offset inside an object of `size` bytes that hits what its readers look at more often
/// than a uniform one would: a segment's header and first slots, any object's stamp.
off_t offset_in(const std::string& name, off_t size, const unsigned char* b) {
  const std::uint32_t raw = b[1] | b[2] << 8 | b[3] << 16;
  switch (b[0] % 4) {
    case 0:
      if (name.rfind("memarea-ipc-", 0) == 0) {
        const off_t slot = static_cast<off_t>(b[1] % 8);
        return static_cast<off_t>(offsetof(wf::segment, slot)) +
               slot * static_cast<off_t>(sizeof(wf::buffer_slot)) +
               static_cast<off_t>(b[2] % sizeof(wf::buffer_slot));
      }
      return raw % 64;
    case 1:
      return raw % 64;  // header
    case 2:
      return std::max<off_t>(0, size - 4096) + raw % 4096;  // the stamp
    default:
      return size > 0 ? static_cast<off_t>(raw % static_cast<std::uint64_t>(size)) : 0;
  }
}

/// What the harness does to files may fail (a name the child just removed): nothing to check.
void attempt(long) {}

off_t size_for(off_t real, unsigned char sel, unsigned char extra) {
  switch (sel % 8) {
    case 0:
      return 0;
    case 1:
      return 4096;
    case 2:
      return real / 2;
    case 3:
      return real > 0 ? real - 1 : 0;
    case 4:
      return real;
    case 5:
      return real + 4096;
    case 6:
      return real > 4096 ? real - 4096 : 0;  // the stamp cut off
    default:
      return static_cast<off_t>(extra) * 512;
  }
}

/// A file of the same name, user and size with the same stamp: what a process of this user can
/// put in place of an object, which no check of name, owner or stamp tells apart.
void replace(const std::string& name, off_t real, unsigned char mode) {
  const std::string path = "/" + name;
  std::vector<char> stamp(4096);
  ssize_t got = 0;
  if (int fd = shm_open(path.c_str(), O_RDONLY | O_CLOEXEC, 0); fd >= 0) {
    got = pread(fd, stamp.data(), stamp.size(), std::max<off_t>(0, real - 4096));
    close(fd);
  }
  shm_unlink(path.c_str());
  const mode_t m = (mode & 1) ? 0640 : 0600;
  const int fd = shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, m);
  if (fd < 0) return;
  fchmod(fd, m);  // past the umask
  if (ftruncate(fd, real) == 0 && got > 0) {
    attempt(
        pwrite(fd, stamp.data(), static_cast<std::size_t>(got), std::max<off_t>(0, real - 4096)));
  }
  close(fd);
}

// --- this process: the importer ----------------------------------------------------------------

/// The input, read a byte at a time (zeros once it ends).
struct reader {
  const std::uint8_t* p;
  std::size_t n;
  unsigned char next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

struct opened {
  void* ptr;
  std::uint32_t handle;
};

void check_inside(void* p) {
  const auto info = memarea::lookup(p);
  const char* c = static_cast<const char*>(p);
  const char* b = static_cast<const char*>(info.base);
  if (!info.base || c < b || c >= b + std::max<std::size_t>(info.size, 1) ||
      info.size > kLargest + 4096) {
    std::fprintf(stderr, "open returned %p outside its mapping (base %p, size %zu)\n", p, info.base,
                 info.size);
    std::abort();
  }
}

/// Copies up to n bytes out of (or into) the mapping at p; a memarea::error is an answer.
void touch(void* p, std::size_t n, bool into) {
  try {
    const auto info = memarea::lookup(p);
    const std::size_t room =
        info.size - static_cast<std::size_t>(static_cast<char*>(p) - static_cast<char*>(info.base));
    n = std::min(n, room);
    std::vector<unsigned char> host(n, 0x5a);
    into ? memarea::copy(p, host.data(), n) : memarea::copy(host.data(), p, n);
  } catch (const memarea::error&) {
  }
}

}  // namespace

// Each input forks, and a fork costs in proportion to this process's resident memory: ASan's
// default quarantine of freed memory (256 MiB) would fill it and slow the harness threefold
// over ten minutes. 32 MiB still holds many inputs' frees for use-after-free reports.
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=32"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("MEMAREA_BACKEND", "sim", 1);
  setenv("MEMAREA_SIM_DEVICES", "2", 1);
  void* page =
      mmap(nullptr, sizeof(board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) std::abort();
  g_board = static_cast<board*>(page);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader in{data, size};
  memarea::ipc::set_cache_limit(2);  // each input starts alike (an input may change it)
  child c = start_child();
  objects obj;
  obj.owner = g_board->owner;
  std::vector<opened> open;
  auto file_op = [&](unsigned char op) {
    const unsigned char sel = in.next();
    if (obj.owner == 0) return;  // the child made nothing
    const std::string name = obj.pick(sel);
    if (name.empty()) return;
    const off_t real = obj.size[name];
    const int fd = shm_open(("/" + name).c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return;
    switch (op) {
      case 0: {  // a few bytes
        unsigned char where[4] = {in.next(), in.next(), in.next(), in.next()};
        const std::size_t len = 1 + in.next() % 8;
        unsigned char bytes[8];
        for (std::size_t i = 0; i < len; ++i) bytes[i] = in.next();
        attempt(pwrite(fd, bytes, len, offset_in(name, real, where)));
        break;
      }
      case 1: {
        const unsigned char to = in.next();
        attempt(ftruncate(fd, size_for(real, to, in.next())));
        break;
      }
      case 2: {
        static constexpr mode_t kModes[] = {0600, 0640, 0606, 0400};
        fchmod(fd, kModes[in.next() % 4]);
        break;
      }
      default:
        replace(name, real, in.next());
        break;
    }
    close(fd);
  };
  for (std::size_t ops = 0; in.n > 0 && ops < kMaxOps; ++ops) {
    const unsigned char op = in.next();
    switch (op % 12) {
      case 0:
      case 1:
        file_op(0);
        break;
      case 2:
        file_op(1);
        break;
      case 3:
        file_op(op & 0x10 ? 2 : 3);
        break;
      case 4: {  // the child's side
        const unsigned char arg = in.next();
        static constexpr command kCommands[] = {cmd_export, cmd_free, cmd_check, cmd_quit};
        ask(c, kCommands[(op >> 4) % 4], arg);
        obj.stale = true;
        break;
      }
      case 5:
      case 6: {  // open, and look at what opened
        const std::uint32_t n = g_board->count;
        if (n == 0) break;
        const std::uint32_t i = in.next() % n;
        const unsigned char how = in.next();
        void* p = nullptr;
        try {
          p = memarea::ipc::open(g_board->handles[i], (how & 1) ? 1 : -1,
                                 (how & 2) ? memarea::ipc::lazy_enable_peer_access : 0);
        } catch (const memarea::error&) {
          break;
        }
        check_inside(p);
        touch(p, std::size_t{1} << (how >> 3 & 15), how & 4);
        open.push_back({p, i});
        break;
      }
      case 7: {  // close one
        if (open.empty()) break;
        const std::size_t j = in.next() % open.size();
        try {
          memarea::ipc::close(open[j].ptr);
        } catch (const memarea::error&) {
        }
        open.erase(open.begin() + static_cast<std::ptrdiff_t>(j));
        break;
      }
      case 8: {  // read or write an open one again (after the files changed)
        if (open.empty()) break;
        const unsigned char how = in.next();
        touch(open[how % open.size()].ptr, std::size_t{1} << (how >> 4), how & 8);
        break;
      }
      case 9:
        memarea::ipc::collect();
        break;
      case 10:
        memarea::ipc::set_cache_limit(in.next() % 4);
        break;
      default:  // what the importer's counters say after the files changed
        (void)memarea::ipc::cached_mappings();
        (void)memarea::ipc::deferred_frees();
        break;
    }
  }
  for (const auto& o : open) {
    try {
      memarea::ipc::close(o.ptr);
    } catch (const memarea::error&) {
    }
  }
  finish(c);
  memarea::ipc::collect();
  memarea::ipc::remove_stale_objects();
  if (obj.owner != 0) obj.remove_all();
  return 0;
}
