// Inter-process sharing with real processes: the helper (tests/helper) is fork+exec'd and gets
// handles as hex on argv; data is random and checked byte for byte both ways. Open counts, the
// import cache and its bounds, deferred and refused frees, a killed importer, descriptors
// across processes. Within one process: api/ipc_test.cpp.
#include "api/common.hpp"
#include "api/process_util.hpp"

#include <memarea/ipc.hpp>
#include <memarea/peer.hpp>
#include <memarea/memarea.h>

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace memarea;
using namespace memarea::test;

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

TEST(IpcProcess, ImporterOnEveryDevice) {
  // Memory of the first and the last device, opened by another process on every device (lazy
  // peer access where it is not the memory's own), read and written back byte for byte.
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = (1 << 16) + 5;
  for (int owner : {0, devices() - 1}) {
    buffer b = area(owner).allocate(n);
    const std::string h = hex(ipc::export_handle(b.data()));
    for (int on = 0; on < devices(); ++on) {
      SCOPED_TRACE(testing::Message() << "memory of device " << owner << ", opened on " << on);
      const auto seed = new_seed(), back = new_seed();
      fill(b.data(), seed, n);
      child c({"check", h, str(n), str(seed), "0", str(back), std::to_string(on)});
      if (on != owner && !peer::can_access(on, owner)) {
        // No peer path (sim peer groups): the open is refused, and nothing was written.
        EXPECT_EQ(c.line(), "MEMAREA_ERROR_PEER_ACCESS_UNSUPPORTED");
        EXPECT_NE(c.wait(), 0);
        EXPECT_TRUE(holds(b.data(), seed, n));
        continue;
      }
      EXPECT_EQ(c.line(), "ok");
      EXPECT_EQ(c.wait(), 0);
      EXPECT_TRUE(holds(b.data(), back, n)) << "the importer's writes are visible here";
    }
    if (devices() == 1) break;
  }
}

TEST(IpcProcess, OpenCountsCacheAndStaleHandles) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 70000;
  const auto seed = new_seed();
  child owner({"export", str(n), str(seed)});
  const auto h = ipc::handle::from_hex(owner.line());
  // Mappings of earlier tests' exporters, all exited, leave the cache now rather than when the
  // background thread gets to them during this test.
  ipc::collect();
  ASSERT_EQ(ipc::cached_mappings(), 0u);

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
  const std::uint64_t owner_lease = owner_from_hex(owner.ask("owner"));  // who made h2's objects
  // They are there now (the end checks they are gone: with an owner of 0, or none of its
  // objects ever there, it would hold vacuously).
  ASSERT_NE(owner_lease, 0u);
  ASSERT_EQ(objects_of(owner_lease, "lease").size(), 1u);
  ASSERT_EQ(objects_of(owner_lease, "ipc").size(), 1u);
  EXPECT_MEMAREA_ERROR((void)ipc::open(h), errc::invalid_handle);
  {
    ipc::mapping m(h2);
    EXPECT_TRUE(holds(m.data(), seed2, n));
    fill(m.data(), seed, n);
  }
  EXPECT_EQ(owner.ask("check " + str(seed)), "ok");
  // The owner exits: its handles are invalid at once (no tick needed: it said so in its
  // segment) and it removed everything it had in /dev/shm.
  owner.close_stdin();
  EXPECT_EQ(owner.wait(), 0);
  try {
    (void)ipc::open(h2);  // cached here: found without asking the driver
    ADD_FAILURE() << "a cached mapping of an exited owner was handed out";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::invalid_handle);
    EXPECT_NE(std::string(e.what()).find("has exited"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ipc::cached_mappings(), 0u);
  EXPECT_TRUE(objects_of(owner_lease).empty());
}

// Pointers into one mapping at more offsets than memarea keeps spare bookkeeping for, opened
// and closed in rounds: every pointer is counted on its own, whatever node it reuses.
TEST(IpcProcess, ManyInteriorPointersKeepTheirOwnCounts) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 1 << 16;
  const auto seed = new_seed();
  child owner({"export", str(n), str(seed)});
  const auto base = ipc::handle::from_hex(owner.line());
  constexpr int kOffsets = 40;
  std::vector<ipc::handle> hs;
  for (int i = 0; i < kOffsets; ++i)
    hs.push_back(ipc::handle::from_hex(owner.ask("interior " + str(1000 + 37 * i))));
  void* p0 = ipc::open(base);
  for (int round = 0; round < 3; ++round) {
    std::vector<void*> ps;
    for (int i = 0; i < kOffsets; ++i) {
      ps.push_back(ipc::open(hs[i]));
      ASSERT_EQ(ps.back(), static_cast<char*>(p0) + 1000 + 37 * i);
    }
    void* twice = ipc::open(hs[7]);  // counted twice: closes twice
    for (int i = kOffsets - 1; i >= 0; --i) ipc::close(ps[i]);
    ipc::close(twice);
    for (int i = 0; i < kOffsets; ++i)
      EXPECT_MEMAREA_ERROR(ipc::close(ps[i]), errc::invalid_value);
    EXPECT_EQ(owner.ask("importers"), "1") << "the base pointer is still open";
  }
  EXPECT_TRUE(holds(p0, seed, n));
  ipc::close(p0);
  EXPECT_EQ(owner.ask("importers"), "0");
  EXPECT_MEMAREA_ERROR(ipc::close(p0), errc::invalid_value);
}

TEST(IpcProcess, CacheLimitEvictsLeastRecentlyUsed) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t old_limit = ipc::cache_limit();
  child owner({"export", "4096", str(new_seed())});
  ipc::collect();  // earlier tests' exporters have exited: their mappings leave the cache now
  ASSERT_EQ(ipc::cached_mappings(), 0u);
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

TEST(IpcProcess, CacheLimitFromTheEnvironment) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  // MEMAREA_IPC_CACHE_LIMIT is read once per process (at its first IPC call): each setting runs
  // in a helper that imports three buffers of this process.
  const std::size_t own_limit = ipc::cache_limit();
  std::vector<buffer> bufs;
  std::vector<std::string> hx;
  for (int i = 0; i < 3; ++i) {
    bufs.push_back(area(0).allocate(4096));
    hx.push_back(hex(ipc::export_handle(bufs.back().data())));
  }
  auto run = [&](std::optional<std::string> value, std::vector<int> order) {
    std::vector<std::string> args{"lru"};
    for (int i : order) args.push_back(hx[static_cast<std::size_t>(i)]);
    child c(args, -1, {{"MEMAREA_IPC_CACHE_LIMIT", std::move(value)}});
    std::string out = c.line();
    return std::make_pair(out, c.wait());
  };
  using result = std::pair<std::string, int>;
  EXPECT_EQ(run("2", {0, 1, 2}), result("limit=2 cached=011", 0))
      << "the third import evicts the least recently used";
  EXPECT_EQ(run("2", {0, 1, 0, 2}), result("limit=2 cached=1011", 0))
      << "least recently used, not first in";
  EXPECT_EQ(run("1", {0, 1, 2}), result("limit=1 cached=001", 0));
  EXPECT_EQ(run("0", {0, 1, 2}), result("limit=0 cached=000", 0)) << "0 disables the cache";
  EXPECT_EQ(run("18446744073709551615", {0, 1, 2}),
            result("limit=18446744073709551615 cached=111", 0));
  EXPECT_EQ(run(std::nullopt, {0, 1, 2}), result("limit=64 cached=111", 0)) << "unset: 64";
  EXPECT_EQ(run("", {0, 1, 2}), result("limit=64 cached=111", 0)) << "empty is unset";
  for (const char* bad : {"abc", "-1", "-0", "+2", " 2", "2 ", "2k", "0x10", "1e3", "2.5",
                          "18446744073709551616", "99999999999999999999999"}) {
    SCOPED_TRACE(std::string("MEMAREA_IPC_CACHE_LIMIT='") + bad + "'");
    auto [out, rc] = run(bad, {0});
    EXPECT_EQ(rc, 2);
    EXPECT_EQ(out.rfind("MEMAREA_ERROR_INVALID_VALUE ", 0), 0u) << out;
    EXPECT_NE(out.find("MEMAREA_IPC_CACHE_LIMIT"), std::string::npos) << out;
  }
  EXPECT_EQ(ipc::cache_limit(), own_limit) << "this process's bound is its own";
}

TEST(IpcProcess, TimingOfFirstOpensFromTheEnvironment) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  // MEMAREA_IPC_TIMING=1 prints one line per first open (a new mapping) to stderr, with the
  // phases; 0 or unset prints nothing; anything else fails every IPC call of that process.
  buffer b = area(0).allocate(4096);
  const std::string hx = hex(ipc::export_handle(b.data()));
  auto run = [&](std::optional<std::string> value) {
    child c({"lru", hx, hx}, -1, {{"MEMAREA_IPC_TIMING", std::move(value)}}, true);
    std::vector<std::string> lines;
    for (std::string l = c.line(); l != "<eof>"; l = c.line()) lines.push_back(l);
    return std::make_pair(lines, c.wait());
  };
  {
    auto [lines, rc] = run("1");
    EXPECT_EQ(rc, 0);
    ASSERT_EQ(lines.size(), 2u) << "one timing line (the second open finds the mapping)";
    const std::string& t = lines[0];
    EXPECT_EQ(t.rfind("memarea ipc timing: first open of buffer ", 0), 0u) << t;
    for (const char* part : {"exporter's segment", "register", "driver open",
                             "driver's size query", "registry", "hand out", "total"})
      EXPECT_NE(t.find(part), std::string::npos) << part << " in " << t;
    EXPECT_NE(t.find("of process " + std::to_string(getpid())), std::string::npos) << t;
    EXPECT_EQ(lines[1], "limit=64 cached=11");
  }
  for (std::optional<std::string> quiet : {std::optional<std::string>("0"),
                                           std::optional<std::string>(""),
                                           std::optional<std::string>()}) {
    auto [lines, rc] = run(quiet);
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(lines, std::vector<std::string>{"limit=64 cached=11"}) << "nothing printed";
  }
  for (const char* bad : {"2", "yes", " 1", "1 ", "01", "true"}) {
    SCOPED_TRACE(std::string("MEMAREA_IPC_TIMING='") + bad + "'");
    auto [lines, rc] = run(bad);
    EXPECT_EQ(rc, 2);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back().rfind("MEMAREA_ERROR_INVALID_VALUE ", 0), 0u) << lines.back();
    EXPECT_NE(lines.back().find("MEMAREA_IPC_TIMING"), std::string::npos) << lines.back();
  }
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
  ipc::collect();  // frees left deferred by earlier tests finish now, not during this one
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

// memarea_free and its C++ equivalents (managed::free, host::free: any memarea allocation by its
// pointer) refuse memory of another process opened through IPC: the registry's observer (IPC)
// names the call that closes it. The refusal changes nothing: the mapping still holds the
// exporter's bytes, writes reach the exporter, it still counts one importer, and it closes.
TEST(IpcProcess, FreeByPointerRefusesImportedMemory) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 20000;
  const auto seed = new_seed();
  child owner({"export", str(n), str(seed)});
  void* p = ipc::open(ipc::handle::from_hex(owner.line()));
  ASSERT_EQ(lookup(p).kind, memory_kind::ipc_imported);
  const std::string why = pointer_text(p) +
                          " is memory of another process opened through IPC; close it with "
                          "memarea_ipc_close_mem_handle / ipc::close";
  EXPECT_EQ(memarea_free(p), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(std::string(memarea_last_error_message()), "memarea_free: " + why);
  for (void (*free_by_pointer)(void*) : {&managed::free, &host::free}) {
    try {
      free_by_pointer(p);
      ADD_FAILURE() << "imported memory was freed by its pointer";
    } catch (const error& e) {
      EXPECT_EQ(e.status(), errc::invalid_value) << e.what();
      EXPECT_EQ(e.message(), why);
    }
  }
  EXPECT_EQ(lookup(p).kind, memory_kind::ipc_imported);
  EXPECT_TRUE(holds(p, seed, n));
  const auto seed2 = new_seed();
  fill(p, seed2, n);
  EXPECT_EQ(owner.ask("check " + str(seed2)), "ok");
  EXPECT_EQ(owner.ask("importers"), "1");
  ipc::close(p);
  EXPECT_EQ(owner.ask("importers"), "0");
}

// The same for shareable memory exported as a descriptor, in a fresh process (the helper) that
// made no other IPC call: making shareable memory sets the observer that refuses, which names
// the call that releases it. After the refusals the memory holds its bytes, through its own
// pointer and through the descriptor imported again, and releases.
TEST(IpcProcess, FreeByPointerRefusesShareableMemory) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 5000;
  child helper({"free-shareable", str(n), str(new_seed())});
  const std::string made = helper.line();
  if (made.rfind("MEMAREA_ERROR_NOT_SUPPORTED", 0) == 0) GTEST_SKIP() << made;
  ASSERT_EQ(made.rfind("at ", 0), 0u) << made;
  const std::string why = made.substr(3) +
                          " is shareable memory; release it with memarea_shareable_release / "
                          "ipc::release_shareable";
  EXPECT_EQ(helper.line(), "MEMAREA_ERROR_INVALID_VALUE memarea_free: " + why);
  EXPECT_EQ(helper.line(), "MEMAREA_ERROR_INVALID_VALUE " + why);  // managed::free
  EXPECT_EQ(helper.line(), "MEMAREA_ERROR_INVALID_VALUE " + why);  // host::free
  EXPECT_EQ(helper.line(), "kind device");
  EXPECT_EQ(helper.line(), "holds ok");
  EXPECT_EQ(helper.line(), "imported ok");
  EXPECT_EQ(helper.line(), "released");
  EXPECT_EQ(helper.wait(), 0);
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
    ipc::collect();  // frees left deferred by earlier tests finish now, not during this one
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
