// Inter-process sharing with real processes: the helper (tests/helper) is fork+exec'd and gets
// handles as hex on argv; data is random and checked byte for byte both ways.
#include "api/common.hpp"

#include <memarea/ipc.hpp>
#include <memarea/memarea.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

using namespace memarea;
using namespace memarea::test;

namespace {

/// The helper binary: $MEMAREA_TEST_HELPER (a copied build tree), else the one CMake built.
const char* const kHelper = [] {
  if (const char* e = std::getenv("MEMAREA_TEST_HELPER"); e && *e) return e;
#ifdef MEMAREA_TEST_HELPER
  return static_cast<const char*>(MEMAREA_TEST_HELPER);
#else
  return static_cast<const char*>(nullptr);
#endif
}();

#define REQUIRE_HELPER() \
  do {                   \
    if (!kHelper) GTEST_SKIP() << "memarea_test_helper was not built"; \
  } while (0)

/// The helper's pattern (tests/helper/main.cpp): a function of (seed, n).
std::vector<unsigned char> pattern(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  if (n) v[0] |= 1;
  return v;
}

std::uint64_t new_seed() {
  static std::mt19937_64 rng{std::random_device{}()};
  std::uint64_t s = 0;
  while (s == 0) s = rng();
  return s >> 1;  // fits strtoull in the helper
}

void fill(void* dev, std::uint64_t seed, std::size_t n) {
  auto v = pattern(seed, n);
  copy(dev, v.data(), n);
}

bool holds(const void* dev, std::uint64_t seed, std::size_t n, std::size_t off = 0) {
  auto v = pattern(seed, n);
  std::vector<unsigned char> got(n - off, 0);
  copy(got.data(), dev, n - off);
  return std::memcmp(got.data(), v.data() + off, n - off) == 0;
}

/// A helper process with its stdin and stdout piped to us.
class child {
 public:
  explicit child(std::vector<std::string> args, int keep_fd = -1) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      if (keep_fd >= 0) fcntl(keep_fd, F_SETFD, 0);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(kHelper));
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(kHelper, argv.data());
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = fdopen(out[0], "r");
  }
  ~child() {
    close_stdin();
    if (pid_ > 0 && !reaped_) wait();
    if (from_) fclose(from_);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  std::string line() {
    char buf[1024];
    if (!fgets(buf, sizeof buf, from_)) return "<eof>";
    std::string s = buf;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  std::string ask(const std::string& cmd) {
    std::string s = cmd + "\n";
    if (::write(to_, s.data(), s.size()) != static_cast<ssize_t>(s.size())) return "<broken>";
    return line();
  }
  void close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }
  /// Exit status (or 128+signal).
  int wait() {
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  void kill_now() { ::kill(pid_, SIGKILL); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
  bool reaped_ = false;
};

std::string hex(const ipc::handle& h) { return h.to_hex(); }
std::string str(std::uint64_t v) { return std::to_string(v); }

/// Shared-memory objects of a process's IPC segment.
int segments_of(pid_t pid) {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    const std::string prefix = "memarea-ipc-" + std::to_string(pid) + "-";
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
    closedir(d);
  }
  return n;
}

}  // namespace

// --- without other processes ---------------------------------------------------------------------

TEST(Ipc, RandomHandlesAreInvalidHandleNeverACrash) {
  std::mt19937_64 rng(new_seed());
  for (int i = 0; i < 10000; ++i) {
    memarea_ipc_handle_t h;
    for (auto& b : h.bytes) b = static_cast<unsigned char>(rng());
    if (i % 3 == 0) std::memcpy(h.bytes, "MAIH", 4);  // a right magic, garbage otherwise
    void* p = reinterpret_cast<void*>(0x1);
    memarea_status s = memarea_ipc_open_mem_handle(&p, h, 0);
    ASSERT_EQ(s, MEMAREA_ERROR_INVALID_HANDLE) << memarea_last_error_message();
    ASSERT_EQ(p, reinterpret_cast<void*>(0x1)) << "a failed open wrote *ptr";
  }
  EXPECT_MEMAREA_ERROR(ipc::handle::from_hex("zz"), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(ipc::handle::from_hex(std::string(256, 'g')), errc::invalid_value);
}

TEST(Ipc, ExportRefusesWhatLegacyIpcCannotShare) {
  MEMAREA_REQUIRE_DEVICES(1);
  memarea_ipc_handle_t h;
  EXPECT_STATUS(memarea_ipc_get_mem_handle(&h, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  int on_stack = 0;
  EXPECT_STATUS(memarea_ipc_get_mem_handle(&h, &on_stack), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_ipc_get_mem_handle(nullptr, &on_stack), MEMAREA_ERROR_INVALID_VALUE);
  buffer managed = area(0, area_flags::unified).allocate(4096);
  EXPECT_STATUS(memarea_ipc_get_mem_handle(&h, managed.data()), MEMAREA_ERROR_NOT_SUPPORTED);
  buffer pinned = area(0, area_flags::host).allocate(4096);
  EXPECT_STATUS(memarea_ipc_get_mem_handle(&h, pinned.data()), MEMAREA_ERROR_NOT_SUPPORTED);
}

TEST(Ipc, SameProcessOpenReturnsTheOriginalPointer) {
  MEMAREA_REQUIRE_DEVICES(1);
  buffer b = area(0).allocate(1 << 16);
  char* interior = static_cast<char*>(b.data()) + 1000;
  auto h = ipc::export_handle(interior);
  EXPECT_EQ(h, ipc::export_handle(interior)) << "repeated export is stable";
  EXPECT_NE(h, ipc::export_handle(b.data())) << "the offset is part of the handle";
  void* p = ipc::open(h);
  EXPECT_EQ(p, interior);
  void* q = ipc::open(h);
  EXPECT_EQ(q, interior);
  ipc::close(p);
  ipc::close(q);
  EXPECT_MEMAREA_ERROR(ipc::close(p), errc::invalid_value);
  EXPECT_STATUS(memarea_ipc_close_mem_handle(b.data()), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_ipc_close_mem_handle(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  // Flags other than 0 and LAZY are refused.
  void* r = nullptr;
  EXPECT_STATUS(memarea_ipc_open_mem_handle(&r, h.c(), 0x2), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_ipc_open_mem_handle(&r, h.c(), 0), MEMAREA_SUCCESS);
  EXPECT_EQ(r, interior);
  EXPECT_STATUS(memarea_ipc_close_mem_handle(r), MEMAREA_SUCCESS);
  // A corrupted byte anywhere is caught by the checksum.
  for (std::size_t i = 0; i < h.bytes.size(); i += 7) {
    auto bad = h;
    bad.bytes[i] ^= 0x5a;
    EXPECT_MEMAREA_ERROR((void)ipc::open(bad), errc::invalid_handle);
  }
}

TEST(Ipc, StaleHandleAfterFreeAndReallocation) {
  MEMAREA_REQUIRE_DEVICES(1);
  const area a(0);
  const std::size_t n = 8192;
  void* p = a.mmap(n);
  auto old = ipc::export_handle(p);
  a.munmap(p, n);
  void* q = a.mmap(n);  // often the same address
  auto fresh = ipc::export_handle(q);
  EXPECT_NE(old, fresh);
  EXPECT_MEMAREA_ERROR((void)ipc::open(old), errc::invalid_handle);
  void* o = ipc::open(fresh);
  EXPECT_EQ(o, q);
  ipc::close(o);
  a.munmap(q, n);
  EXPECT_MEMAREA_ERROR((void)ipc::open(fresh), errc::invalid_handle);
}

TEST(Ipc, FdOverASocketInOneProcess) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  auto payload = random_bytes(300);
  EXPECT_STATUS(memarea_ipc_send_fd(sv[0], pipefd[1], payload.data(), payload.size()),
                MEMAREA_SUCCESS);
  std::vector<unsigned char> got(300, 0);
  int fd = -1;
  size_t received = 0;
  EXPECT_STATUS(memarea_ipc_recv_fd(sv[1], &fd, got.data(), got.size(), &received),
                MEMAREA_SUCCESS);
  EXPECT_EQ(received, payload.size());
  EXPECT_EQ(got, payload);
  ASSERT_GE(fd, 0);
  // The received descriptor is the same pipe end.
  ASSERT_EQ(::write(fd, "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(pipefd[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  ::close(fd);
  // Too small a buffer: invalid_value and no descriptor leaks.
  EXPECT_STATUS(memarea_ipc_send_fd(sv[0], pipefd[1], payload.data(), payload.size()),
                MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_ipc_recv_fd(sv[1], &fd, got.data(), 10, &received),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_ipc_send_fd(-1, pipefd[1], nullptr, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_ipc_send_fd(sv[0], pipefd[1], nullptr, 70000),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_ipc_recv_fd(sv[1], nullptr, nullptr, 0, nullptr),
                MEMAREA_ERROR_INVALID_VALUE);
  for (int f : {sv[0], sv[1], pipefd[0], pipefd[1]}) ::close(f);
}

TEST(Ipc, ShareableMemoryIsNotFreedByAreasOrLegacyIpc) {
  MEMAREA_REQUIRE_DEVICES(1);
  void* p = nullptr;
  size_t allocated = 0;
  memarea_status s = memarea_shareable_create(&p, &allocated, 5000, 0);
  if (s == MEMAREA_ERROR_NOT_SUPPORTED) GTEST_SKIP() << memarea_last_error_message();
  ASSERT_EQ(s, MEMAREA_SUCCESS) << memarea_last_error_message();
  EXPECT_GE(allocated, 5000u);
  EXPECT_EQ(lookup(p).kind, memory_kind::device);
  memarea_ipc_handle_t h;
  EXPECT_STATUS(memarea_ipc_get_mem_handle(&h, p), MEMAREA_ERROR_NOT_SUPPORTED);
  EXPECT_MEMAREA_ERROR(area(0).munmap(p, allocated), errc::invalid_value);
  int fd = -1;
  EXPECT_STATUS(memarea_shareable_export_fd(&fd, static_cast<char*>(p) + 1),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_shareable_export_fd(&fd, p), MEMAREA_SUCCESS);
  // Imported in this process too: the same bytes through a second mapping.
  fill(p, 42, 5000);
  void* q = nullptr;
  EXPECT_STATUS(memarea_shareable_import_fd(&q, fd, allocated, 0), MEMAREA_SUCCESS);
  ::close(fd);
  EXPECT_TRUE(holds(q, 42, 5000));
  EXPECT_EQ(lookup(q).kind, memory_kind::ipc_imported);
  EXPECT_STATUS(memarea_shareable_release(q), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_shareable_release(p), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_shareable_release(p), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_shareable_import_fd(&q, -1, 10, 0), MEMAREA_ERROR_INVALID_VALUE);
}

// --- with other processes ------------------------------------------------------------------------

TEST(IpcProcess, DataVisibleBothWaysAndInteriorPointers) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = (1 << 20) + 123;
  buffer b = area(0).allocate(n);
  const auto seed = new_seed(), back = new_seed();
  fill(b.data(), seed, n);
  {
    child c({"check", hex(ipc::export_handle(b.data())), str(n), str(seed), "0", str(back)});
    EXPECT_EQ(c.line(), "ok");
    EXPECT_EQ(c.wait(), 0);
  }
  EXPECT_TRUE(holds(b.data(), back, n)) << "the importer's writes are visible here";
  // An interior pointer opens at its offset.
  const std::size_t off = 4096 + 17;
  fill(b.data(), seed, n);
  child c({"check", hex(ipc::export_handle(static_cast<char*>(b.data()) + off)), str(n),
           str(seed), str(off), "0"});
  EXPECT_EQ(c.line(), "ok");
  EXPECT_EQ(c.wait(), 0);
}

TEST(IpcProcess, OpenCountsCacheAndStaleHandles) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 70000;
  const auto seed = new_seed();
  child owner({"export", str(n), str(seed)});
  const auto h = ipc::handle::from_hex(owner.line());

  void* p = ipc::open(h);
  EXPECT_TRUE(holds(p, seed, n));
  EXPECT_EQ(lookup(p).kind, memory_kind::ipc_imported);
  EXPECT_EQ(lookup(static_cast<char*>(p) + 100).base, p);
  EXPECT_EQ(owner.ask("importers"), "1");
  void* q = ipc::open(h);
  EXPECT_EQ(p, q) << "a second open returns the same mapping";
  EXPECT_MEMAREA_ERROR(area(0).munmap(p, n), errc::invalid_value);
  ipc::close(q);
  EXPECT_EQ(owner.ask("importers"), "1");
  ipc::close(p);
  EXPECT_EQ(owner.ask("importers"), "0") << "the last close ends the import";
  EXPECT_MEMAREA_ERROR(ipc::close(p), errc::invalid_value);
  EXPECT_EQ(ipc::cached_mappings(), 1u);
  void* r = ipc::open(h);  // from the cache
  EXPECT_EQ(r, p);
  EXPECT_EQ(ipc::cached_mappings(), 0u);
  ipc::close(r);

  // The owner frees it: the handle is stale here and in other processes, and the cached
  // mapping is dropped.
  EXPECT_EQ(owner.ask("free"), "freed");
  EXPECT_MEMAREA_ERROR((void)ipc::open(h), errc::invalid_handle);
  EXPECT_EQ(ipc::cached_mappings(), 0u);
  {
    child other({"expect", hex(h), "MEMAREA_ERROR_INVALID_HANDLE"});
    EXPECT_EQ(other.wait(), 0) << other.line();
  }
  // A new allocation (maybe at the same address) has a different handle that works.
  const auto seed2 = new_seed();
  const auto h2 = ipc::handle::from_hex(owner.ask("alloc " + str(n) + " " + str(seed2)));
  EXPECT_NE(h, h2);
  EXPECT_MEMAREA_ERROR((void)ipc::open(h), errc::invalid_handle);
  {
    ipc::mapping m(h2);
    EXPECT_TRUE(holds(m.get(), seed2, n));
    fill(m.get(), seed, n);
  }
  EXPECT_EQ(owner.ask("check " + str(seed)), "ok");
  // The owner exits: its handles are invalid and its segment is gone.
  const pid_t owner_pid = owner.pid();
  owner.close_stdin();
  EXPECT_EQ(owner.wait(), 0);
  EXPECT_MEMAREA_ERROR((void)ipc::open(h2), errc::invalid_handle);
  EXPECT_EQ(segments_of(owner_pid), 0);
}

TEST(IpcProcess, CacheLimitEvictsLeastRecentlyUsed) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t old_limit = ipc::cache_limit();
  child owner({"export", "4096", str(new_seed())});
  std::vector<ipc::handle> hs{ipc::handle::from_hex(owner.line())};
  for (int i = 0; i < 3; ++i)
    hs.push_back(ipc::handle::from_hex(owner.ask("interior " + str(64 * (i + 1)))));
  ipc::set_cache_limit(8);
  for (auto& h : hs) ipc::close(ipc::open(h));  // one buffer: one mapping
  EXPECT_EQ(ipc::cached_mappings(), 1u);
  ipc::set_cache_limit(0);
  EXPECT_EQ(ipc::cached_mappings(), 0u);
  void* p = ipc::open(hs[0]);
  ipc::close(p);
  EXPECT_EQ(ipc::cached_mappings(), 0u);
  ipc::set_cache_limit(old_limit);
}

TEST(IpcProcess, FreeWhileImportedIsDeferredUntilTheLastClose) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const area a(0);
  const std::size_t n = 100000;
  void* p = a.mmap(n);
  const auto seed = new_seed();
  fill(p, seed, n);
  const auto h = ipc::export_handle(p);
  child holder({"hold", hex(h), str(n), str(seed)});
  ASSERT_EQ(holder.line(), "opened");
  EXPECT_EQ(ipc::importers(p), 1);
  const std::size_t before = ipc::deferred_frees();
  a.munmap(p, n);  // succeeds at once
  EXPECT_EQ(ipc::deferred_frees(), before + 1);
  EXPECT_MEMAREA_ERROR(a.munmap(p, n), errc::invalid_value);  // the registry entry is gone
  EXPECT_EQ(holder.ask("check " + str(seed)), "ok") << "the importer still has its memory";
  {
    child late({"expect", hex(h), "MEMAREA_ERROR_INVALID_HANDLE"});
    EXPECT_EQ(late.wait(), 0) << "a freed buffer cannot be opened any more";
  }
  EXPECT_EQ(holder.ask("close"), "closed");
  ipc::collect();
  EXPECT_EQ(ipc::deferred_frees(), before);
  holder.close_stdin();
  EXPECT_EQ(holder.wait(), 0);
}

TEST(IpcProcess, FreeIsRefusedWhenAsked) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  memarea_area_t a;
  ASSERT_EQ(memarea_area_create(&a, 0, 0), MEMAREA_SUCCESS);
  const std::size_t n = 50000;
  void* p = nullptr;
  ASSERT_EQ(memarea_area_mmap(a, &p, n, nullptr), MEMAREA_SUCCESS);
  const auto seed = new_seed();
  fill(p, seed, n);
  const auto h = ipc::export_handle(p);
  {
    ipc::set_free_policy(ipc::free_policy::refuse);
    child holder({"hold", hex(h), str(n), str(seed)});
    ASSERT_EQ(holder.line(), "opened");
    EXPECT_STATUS(memarea_area_munmap(a, p, n), MEMAREA_ERROR_BUSY);
    EXPECT_TRUE(holds(p, seed, n)) << "a refused free changes nothing";
    ipc::set_free_policy(ipc::free_policy::defer);
    ipc::set_free_policy(p, ipc::free_policy::refuse);  // per buffer
    EXPECT_STATUS(memarea_area_munmap(a, p, n), MEMAREA_ERROR_BUSY);
    EXPECT_EQ(holder.ask("close"), "closed");
  }
  EXPECT_STATUS(memarea_area_munmap(a, p, n), MEMAREA_SUCCESS);
  EXPECT_EQ(ipc::get_free_policy(), ipc::free_policy::defer);
  memarea_area_destroy(a);
}

TEST(IpcProcess, KilledImporterDoesNotPinMemory) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const area a(0);
  const std::size_t n = 4096;
  const auto seed = new_seed();
  for (bool free_first : {false, true}) {
    SCOPED_TRACE(free_first ? "freed, then the importer killed" : "killed, then freed");
    void* p = a.mmap(n);
    fill(p, seed, n);
    child holder({"hold", hex(ipc::export_handle(p)), str(n), str(seed)});
    ASSERT_EQ(holder.line(), "opened");
    const std::size_t before = ipc::deferred_frees();
    if (free_first) {
      a.munmap(p, n);
      EXPECT_EQ(ipc::deferred_frees(), before + 1);
    }
    holder.kill_now();
    EXPECT_EQ(holder.wait(), 128 + SIGKILL);
    if (free_first) {
      ipc::collect();
      EXPECT_EQ(ipc::deferred_frees(), before);
    } else {
      EXPECT_EQ(ipc::importers(p), 0) << "the dead importer is purged";
      a.munmap(p, n);
      EXPECT_EQ(ipc::deferred_frees(), before) << "nothing to wait for";
    }
  }
}

TEST(IpcProcess, FdPathAcrossProcesses) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  ipc::shareable s;
  try {
    s = ipc::create_shareable(30000, 0);
  } catch (const error& e) {
    if (e.status() == errc::not_supported) GTEST_SKIP() << e.what();
    throw;
  }
  const std::size_t n = 30000;
  const auto seed = new_seed(), back = new_seed();
  fill(s.ptr, seed, n);
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  {
    child c({"recv-fd", str(sv[1]), str(n), str(seed), str(back)}, sv[1]);
    int fd = ipc::export_fd(s.ptr);
    std::uint64_t size = s.size;
    ipc::send_fd(sv[0], fd, &size, sizeof size);
    ::close(fd);
    EXPECT_EQ(c.line(), "ok");
    EXPECT_EQ(c.wait(), 0);
  }
  EXPECT_TRUE(holds(s.ptr, back, n));
  ipc::release_shareable(s.ptr);
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(IpcConcurrent, EightThreadsImportOneHandle) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 8192;
  const auto seed = new_seed();
  child owner({"export", str(n), str(seed)});
  const auto h = ipc::handle::from_hex(owner.line());
  const auto interior = ipc::handle::from_hex(owner.ask("interior 512"));
  std::atomic<int> bad{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 200; ++i) {
          const bool in = (i + t) % 2 == 0;
          void* p = ipc::open(in ? interior : h);
          if (i % 50 == 0 && !holds(p, seed, n, in ? 512 : 0)) ++bad;
          ipc::close(p);
        }
      } catch (const error&) {
        ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(owner.ask("importers"), "0");
}

TEST(IpcProcess, SegmentsOfDeadExportersAreRemoved) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  // A pid that is surely gone: a child that exited and was reaped.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  int st = 0;
  waitpid(dead, &st, 0);
  const std::string name = "/memarea-ipc-" + std::to_string(dead) + "-12345";
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ::close(fd);
  ASSERT_EQ(segments_of(dead), 1);
  {
    child exporter({"export", "4096", str(new_seed())});  // its first export sweeps
    EXPECT_EQ(exporter.line().size(), 256u);
  }
  EXPECT_EQ(segments_of(dead), 0);
  shm_unlink(name.c_str());  // in case the sweep missed it
}
