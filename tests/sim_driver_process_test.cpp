// The sim backend across processes and threads: IPC handles and shareable fds used by fork()ed
// children, eight threads at once, and a destructor that gives every resource back.
#include "base/lease.hpp"
#include "sim_driver_test_support.hpp"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace memarea::detail {
namespace {

/// The shm objects of this process that are still in /dev/shm.
std::vector<std::string> my_shm_objects() {
  std::vector<std::string> out;
  const std::uint64_t owner = memarea::detail::lease::current();
  char owner_hex[17];
  std::snprintf(owner_hex, sizeof owner_hex, "%016llx", static_cast<unsigned long long>(owner));
  const std::string prefix = "memarea-sim-" + std::string(owner_hex) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name).rfind(prefix, 0) == 0) out.emplace_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Runs fn in a fork()ed child and returns its exit status (fn's return value; 100+ on a crash).
/// The child only maps memory and never starts threads, which keeps it valid after forking a
/// process that has stream threads.
template <class F>
int in_child(F fn) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 200;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// --- IPC across processes ------------------------------------------------------------------------

TEST(SimDriver, IpcAcrossFork) {
  const sim_config cfg = config(2, 8 << 20);
  auto d = make_sim_driver(cfg);
  const size_t n = 3 * 4096 + 17;
  auto data = random_bytes(n, 21);
  void* p = nullptr;
  ASSERT_OK(d->malloc_device(1, n, &p));
  ASSERT_OK(d->memcpy_async(p, data.data(), n, 1, nullptr));
  ASSERT_OK(d->stream_synchronize(1, nullptr));
  ipc_native_handle h;
  ASSERT_OK(d->ipc_get_handle(p, &h));
  EXPECT_CODE(d->ipc_get_handle(static_cast<char*>(p) + 1, &h), errc::invalid_value);
  int local = 0;
  EXPECT_CODE(d->ipc_get_handle(&local, &h), errc::invalid_value);
  EXPECT_CODE(d->ipc_get_handle(p, nullptr), errc::invalid_value);
  void* q = nullptr;
  EXPECT_CODE(d->ipc_open_handle(0, h, 0, &q), errc::invalid_context);  // same process
  ipc_native_handle garbage{};
  std::memset(garbage.bytes, 0x5a, sizeof garbage.bytes);
  EXPECT_CODE(d->ipc_open_handle(0, garbage, 0, &q), errc::invalid_handle);
  EXPECT_CODE(d->ipc_open_handle(0, h, 2, &q), errc::invalid_value);
  EXPECT_CODE(d->ipc_open_handle(5, h, 0, &q), errc::invalid_device);
  EXPECT_CODE(d->ipc_open_handle(0, h, 0, nullptr), errc::invalid_value);

  int rc = in_child([&]() -> int {
    auto c = make_sim_driver(cfg);
    void* m = nullptr;
    if (!c->ipc_open_handle(0, h, MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS, &m).ok()) return 1;
    if (std::memcmp(m, data.data(), n) != 0) return 2;
    void* m2 = nullptr;
    if (!c->ipc_open_handle(0, h, 0, &m2).ok() || m2 != m) return 3;  // same address, refcount
    pointer_info info;
    if (!c->pointer_query(static_cast<char*>(m) + n - 1, &info).ok()) return 4;
    if (info.kind != MEMAREA_MEMORY_IPC_IMPORTED || info.base != m || info.size != n) return 5;
    if (c->free_device(m).code != errc::invalid_value) return 6;
    // Write through the mapping with the driver, for the parent to see.
    std::vector<unsigned char> mine(n);
    for (size_t i = 0; i < n; ++i) mine[i] = static_cast<unsigned char>(data[i] ^ 0xff);
    std::memcpy(m, mine.data(), n);
    if (!c->ipc_close_handle(m).ok()) return 7;
    if (std::memcmp(m, mine.data(), n) != 0) return 8;  // one reference left: still mapped
    if (!c->ipc_close_handle(m).ok()) return 9;
    if (c->ipc_close_handle(m).code != errc::invalid_value) return 10;
    if (c->pointer_query(m, &info).code != errc::not_found) return 11;
    int x = 0;
    if (c->ipc_close_handle(&x).code != errc::invalid_value) return 12;
    return 0;
  });
  ASSERT_EQ(rc, 0);
  std::vector<unsigned char> back(n);
  ASSERT_OK(d->memcpy_async(back.data(), p, n, 0, nullptr));
  ASSERT_OK(d->stream_synchronize(0, nullptr));
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], static_cast<unsigned char>(data[i] ^ 0xff));

  // After free the handle is stale.
  ASSERT_OK(d->free_device(p));
  rc = in_child([&]() -> int {
    auto c = make_sim_driver(cfg);
    void* m = nullptr;
    dstatus s = c->ipc_open_handle(0, h, 0, &m);
    return s.code == errc::invalid_handle ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_CODE(d->ipc_get_handle(p, &h), errc::invalid_value);
}

TEST(SimDriver, IpcOpenAcrossPeerGroups) {
  const sim_config cfg = config(4, 1 << 20, {{0, 1}, {2, 3}});
  auto d = make_sim_driver(cfg);
  void* p = nullptr;
  ASSERT_OK(d->malloc_device(0, 4096, &p));
  ipc_native_handle h;
  ASSERT_OK(d->ipc_get_handle(p, &h));
  int rc = in_child([&]() -> int {
    auto c = make_sim_driver(cfg);
    void* m = nullptr;
    if (c->ipc_open_handle(2, h, MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS, &m).code !=
        errc::peer_access_unsupported) {
      return 1;
    }
    if (!c->ipc_open_handle(1, h, MEMAREA_IPC_LAZY_ENABLE_PEER_ACCESS, &m).ok()) return 2;
    return c->ipc_close_handle(m).ok() ? 0 : 3;
  });
  EXPECT_EQ(rc, 0);
  ASSERT_OK(d->free_device(p));
}

TEST(SimDriver, ShareableFdAcrossFork) {
  const sim_config cfg = config(2, 1 << 20);
  auto d = make_sim_driver(cfg);
  shareable_allocation a;
  EXPECT_CODE(d->shareable_create(0, 0, &a), errc::invalid_value);
  EXPECT_CODE(d->shareable_create(2, 10, &a), errc::invalid_device);
  EXPECT_CODE(d->shareable_create(0, 10, nullptr), errc::invalid_value);
  EXPECT_CODE(d->shareable_create(0, 2 << 20, &a), errc::out_of_memory);
  ASSERT_OK(d->shareable_create(1, 5000, &a));
  EXPECT_EQ(a.size, 8192u);
  EXPECT_EQ(a.device, 1);
  size_t free = 0, total = 0;
  ASSERT_OK(d->mem_get_info(1, &free, &total));
  EXPECT_EQ(free, total - 8192);
  pointer_info info;
  ASSERT_OK(d->pointer_query(static_cast<char*>(a.ptr) + 8000, &info));
  EXPECT_EQ(info.kind, MEMAREA_MEMORY_DEVICE);
  EXPECT_EQ(info.device, 1);
  auto data = random_bytes(a.size, 33);
  std::memcpy(a.ptr, data.data(), a.size);
  int fd = -1;
  ASSERT_OK(d->shareable_export_fd(a, &fd));
  ASSERT_GE(fd, 0);
  EXPECT_CODE(d->shareable_export_fd(a, nullptr), errc::invalid_value);
  shareable_allocation bogus;
  int local = 0;
  bogus.ptr = &local;
  EXPECT_CODE(d->shareable_export_fd(bogus, &fd), errc::invalid_value);
  EXPECT_CODE(d->shareable_release(bogus), errc::invalid_value);

  const size_t size = a.size;
  int rc = in_child([&]() -> int {
    auto c = make_sim_driver(cfg);
    shareable_allocation im;
    if (!c->shareable_import_fd(0, fd, size, &im).ok()) return 1;
    if (std::memcmp(im.ptr, data.data(), size) != 0) return 2;
    pointer_info pi;
    if (!c->pointer_query(im.ptr, &pi).ok() || pi.kind != MEMAREA_MEMORY_IPC_IMPORTED) return 3;
    std::memset(im.ptr, 0x3c, size);
    if (!c->shareable_release(im).ok()) return 4;
    if (c->shareable_release(im).code != errc::invalid_value) return 5;
    return 0;
  });
  ASSERT_EQ(rc, 0);
  for (size_t i = 0; i < size; ++i) ASSERT_EQ(static_cast<unsigned char*>(a.ptr)[i], 0x3c);

  // Import in this process too, and the import's checks.
  shareable_allocation im;
  EXPECT_CODE(d->shareable_import_fd(0, fd, size + 1, &im), errc::invalid_value);
  EXPECT_CODE(d->shareable_import_fd(0, -1, size, &im), errc::invalid_value);
  EXPECT_CODE(d->shareable_import_fd(0, fd, 0, &im), errc::invalid_value);
  EXPECT_CODE(d->shareable_import_fd(3, fd, size, &im), errc::invalid_device);
  ASSERT_OK(d->shareable_import_fd(0, fd, size, &im));
  close(fd);  // the import keeps its own reference
  EXPECT_NE(im.ptr, a.ptr);
  static_cast<unsigned char*>(im.ptr)[10] = 0x99;
  EXPECT_EQ(static_cast<unsigned char*>(a.ptr)[10], 0x99);
  ASSERT_OK(d->mem_get_info(0, &free, &total));
  EXPECT_EQ(free, total);  // imports are not charged
  ASSERT_OK(d->shareable_release(im));
  ASSERT_OK(d->shareable_release(a));
  ASSERT_OK(d->mem_get_info(1, &free, &total));
  EXPECT_EQ(free, total);
}

// --- threads and cleanup -------------------------------------------------------------------------

TEST(SimDriver, EightThreadsAllocateCopyFree) {
  // Objects of this pid from before the test are not its doing (a dead process with the same
  // pid, or an earlier test); CI once saw one here and could not name it.
  const auto before = my_shm_objects();
  auto d = make_sim_driver(config(2, 256 << 20));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      int dev = t % 2;
      if (!d->set_current_device(dev).ok()) ++failures;
      native_stream s = nullptr;
      if (!d->stream_create(dev, &s).ok()) {
        ++failures;
        return;
      }
      native_event e = nullptr;
      if (!d->event_create(dev, &e, event_timing::off).ok()) ++failures;
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 60; ++i) {
        size_t n = 1 + rng() % (64 << 10);
        auto data = random_bytes(n, static_cast<unsigned>(t * 1000 + i));
        std::vector<unsigned char> back(n, 0);
        void* p = nullptr;
        void* m = nullptr;
        if (!d->malloc_device(dev, n, &p).ok()) {
          ++failures;
          continue;
        }
        if (!d->malloc_managed(dev, n, MEMAREA_MEM_ATTACH_GLOBAL, &m).ok()) ++failures;
        if (!d->memcpy_async(p, data.data(), n, dev, s).ok()) ++failures;
        if (i % 3) {
          if (!d->memcpy_async(m, p, n, dev, s).ok()) ++failures;
        } else {
          // Through the default stream, ordered back into s with an event.
          if (!d->event_record(e, dev, s).ok()) ++failures;
          if (!d->stream_wait_event(dev, nullptr, e).ok()) ++failures;
          if (!d->memcpy_async(m, p, n, dev, nullptr).ok()) ++failures;
          if (!d->event_record(e, dev, nullptr).ok()) ++failures;
          if (!d->stream_wait_event(dev, s, e).ok()) ++failures;
        }
        if (!d->mem_prefetch_async(m, n, location::device(dev), dev, s).ok()) ++failures;
        if (!d->memcpy_async(back.data(), m, n, dev, s).ok()) ++failures;
        if (!d->device_synchronize(dev).ok()) ++failures;
        if (back != data) ++failures;
        pointer_info info;
        if (!d->pointer_query(static_cast<char*>(p) + n - 1, &info).ok() || info.base != p) {
          ++failures;
        }
        if (!d->free_device(p).ok()) ++failures;
        if (!d->free_managed(m).ok()) ++failures;
      }
      int cur = -1;
      if (!d->get_current_device(&cur).ok() || cur != dev) ++failures;
      if (!d->event_destroy(dev, e).ok()) ++failures;
      if (!d->stream_destroy(dev, s).ok()) ++failures;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int dev = 0; dev < 2; ++dev) {
    size_t free = 0, total = 0;
    ASSERT_OK(d->mem_get_info(dev, &free, &total));
    EXPECT_EQ(free, total);
  }
  const auto after = my_shm_objects();
  std::string names;
  for (const auto& n : after) names += " " + n;
  EXPECT_EQ(after, before) << "left in /dev/shm:" << names << " (" << before.size()
                           << " there before)";
}

/// Number of open file descriptors of this process.
size_t open_fds() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

TEST(SimDriver, DestructorReleasesEverything) {
  const auto use_everything_and_leave_it = [] {
    auto d = make_sim_driver(config(2));
    void* p = nullptr;
    void* h = nullptr;
    void* m = nullptr;
    shareable_allocation a;
    native_stream s = nullptr;
    native_event e = nullptr;
    ASSERT_OK(d->malloc_device(0, 1 << 20, &p));
    ASSERT_OK(d->malloc_device(1, 100, &p));
    ASSERT_OK(d->malloc_host(0, 100, host_mapped, &h));
    ASSERT_OK(d->malloc_managed(1, 4096, MEMAREA_MEM_ATTACH_GLOBAL, &m));
    ASSERT_OK(d->shareable_create(0, 4096, &a));
    ASSERT_OK(d->stream_create(1, &s));
    ASSERT_OK(d->event_create(1, &e, event_timing::off));
    ASSERT_OK(d->memset_async(p, 1, 100, 1, s));
    ASSERT_OK(d->event_record(e, 1, s));
    ASSERT_OK(d->memset_async(m, 1, 100, 0, nullptr));
    EXPECT_EQ(my_shm_objects().size(), 2u);
    // Leave everything allocated: the destructor must clean up.
  };
  // Once first: what the process keeps for its life (its lease, opened with the first shared
  // allocation) is open before the count, whichever test ran before this one.
  use_everything_and_leave_it();
  EXPECT_TRUE(my_shm_objects().empty());
  const size_t fds = open_fds();
  use_everything_and_leave_it();
  EXPECT_TRUE(my_shm_objects().empty());
  EXPECT_EQ(open_fds(), fds);
}

}  // namespace
}  // namespace memarea::detail
