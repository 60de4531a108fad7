// Liveness of IPC's two sides, and the sweep of what dead processes leave in /dev/shm (issue 14:
// liveness off the hot path, exporters and importers dying; issue 19: leaks after a crash,
// containers, another user), with leases, segments and the background thread's clock in hand.
// Real processes; run against whichever backend is active. Dying peers seen through the public
// API alone: api/ipc_liveness_test.cpp.
#include "whitebox/whitebox.hpp"

#include "base/housekeeper.hpp"

#include <memarea/ipc.hpp>

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace memarea;
using namespace memarea::test;
namespace lease = memarea::detail::lease;
namespace housekeeper = memarea::detail::housekeeper;
namespace mt = memarea::detail::testing;
namespace wf = memarea::detail::ipc_internal;

namespace {

/// A clock the test moves by hand (the testing interface's set_housekeeper_clock).
std::atomic<std::int64_t> g_fake_ns{0};
housekeeper::clock_type::time_point fake_now() noexcept {
  return housekeeper::clock_type::time_point(std::chrono::nanoseconds(g_fake_ns.load()));
}

/// Restores the real clock however the test ends.
struct fake_clock {
  fake_clock() {
    g_fake_ns.store(housekeeper::clock_type::now().time_since_epoch().count());
    mt::set_housekeeper_clock(&fake_now);
  }
  ~fake_clock() { mt::set_housekeeper_clock(nullptr); }
  fake_clock(const fake_clock&) = delete;
  fake_clock& operator=(const fake_clock&) = delete;
  void advance(std::chrono::nanoseconds d) { g_fake_ns.fetch_add(d.count()); }
};

}  // namespace

// Issue 19, finding 3: a process killed by SIGKILL, abort or SIGTERM, or leaving by _exit, left
// its segment and (on sim) all of its device memory in /dev/shm for ever. Now its lease tells
// the sweep it is gone, and the sweep removes all of it, never a live process's objects.
TEST(IpcLiveness, SweepRemovesWhatADeadExporterLeft) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  struct way {
    const char* name;
    int status;  // the exit status child::wait reports
  };
  for (const way w : {way{"SIGKILL", 128 + SIGKILL}, way{"SIGTERM", 128 + SIGTERM},
                      way{"abort", 128 + SIGABRT}, way{"exit-now", 0}}) {
    SCOPED_TRACE(w.name);
    child exporter({"export", "100000", str(new_seed())});
    const ipc::handle h = ipc::handle::from_hex(exporter.line());
    const std::uint64_t owner = owner_of(h);
    EXPECT_EQ(owner_from_hex(exporter.ask("owner")), owner);
    EXPECT_EQ(objects_of(owner, "lease").size(), 1u);
    EXPECT_EQ(objects_of(owner, "ipc").size(), 1u);
    if (backend_name() == "sim") {
      EXPECT_EQ(objects_of(owner, "sim").size(), 1u);
    }
    const std::size_t made = objects_of(owner).size();
    // Alive: a sweep leaves it alone.
    (void)ipc::remove_stale_objects();
    EXPECT_EQ(objects_of(owner).size(), made);
    if (std::string(w.name) == "SIGKILL") exporter.kill_now();
    if (std::string(w.name) == "SIGTERM") ::kill(exporter.pid(), SIGTERM);
    if (std::string(w.name) == "abort" || std::string(w.name) == "exit-now")
      (void)exporter.ask(w.name);
    EXPECT_EQ(exporter.wait(), w.status);
    // (Another test process's background sweep may get there first: what counts is that
    // nothing of it is left once a sweep ran.)
    (void)ipc::remove_stale_objects();
    EXPECT_TRUE(objects_of(owner).empty());
    EXPECT_MEMAREA_ERROR((void)ipc::open(h), errc::invalid_handle);
  }
}

// CI flake (session 10): two sweeps of one dead owner at once. The second used to find the
// lease locked by the first, count it a live owner and return while the first was still
// removing. Now a sweep waits for another sweep's lock on the lease (here: held by hand, as
// another process's sweep would) and returns only once the dead owner's objects are gone; one
// held for longer than it waits is left to the next sweep (busy), never mistaken for a live owner.
// The lock is taken while the exporter still lives, so that no other process's sweep (other
// test processes run at the same time) removes its objects before the test's own sweep races.
TEST(IpcLiveness, TwoSweepsOfOneDeadOwnerTakeTurns) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  for (const bool held_too_long : {false, true}) {
    SCOPED_TRACE(held_too_long ? "held too long" : "held briefly");
    child exporter({"export", "70000", str(new_seed())});
    const ipc::handle h = ipc::handle::from_hex(exporter.line());
    const std::uint64_t owner = owner_of(h);
    ASSERT_NE(owner, 0u);
    char path[64];
    std::snprintf(path, sizeof path, "/dev/shm/memarea-lease-%016llx",
                  static_cast<unsigned long long>(owner));
    const int other_sweep = ::open(path, O_RDWR | O_CLOEXEC);
    ASSERT_GE(other_sweep, 0) << path << ": " << std::strerror(errno);
    flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = lease::kSweepLockByte;
    fl.l_len = 1;
    // (Another process's sweep holds it for a moment while it finds the exporter alive.)
    ASSERT_TRUE(within(5, [&] { return ::fcntl(other_sweep, F_OFD_SETLK, &fl) == 0; }));
    const std::size_t made = objects_of(owner).size();
    ASSERT_GE(made, 2u);  // its lease and its IPC segment at least
    exporter.kill_now();
    EXPECT_EQ(exporter.wait(), 128 + SIGKILL);
    EXPECT_EQ(objects_of(owner).size(), made) << "removed under another sweep's lock";
    if (held_too_long) {
      const auto report = lease::sweep();
      // (At least: other test processes may be holding their own dead exporters' leases.)
      EXPECT_GE(report.busy, 1u);
      EXPECT_EQ(objects_of(owner).size(), made) << "removed under another sweep's lock";
      ::close(other_sweep);
    } else {
      std::thread release([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ::close(other_sweep);
      });
      (void)lease::sweep();
      release.join();
      // What it found is gone when it returns (removed by it, or by a sweep of another test
      // process that took its turn first).
      EXPECT_TRUE(objects_of(owner).empty());
    }
    (void)lease::sweep();
    EXPECT_TRUE(objects_of(owner).empty());
    EXPECT_MEMAREA_ERROR((void)ipc::open(h), errc::invalid_handle);
  }
}

// Issue 14: PID reuse. Processes are named by their lease, never by pid, so a live process that
// has (or is given) a dead one's pid cannot keep its memory pinned or its handles valid.
TEST(IpcLiveness, AReusedPidCannotPassForTheDeadProcess) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  {
    SCOPED_TRACE("an importer slot naming a live pid but a gone lease");
    const area a(0);
    const std::size_t n = 4096;
    void* p = a.mmap(n);
    const ipc::handle h = ipc::export_handle(p);
    wf::segment* seg = map_segment_of(h);
    ASSERT_NE(seg, nullptr);
    wf::wire w;
    std::memcpy(&w, h.bytes.data(), sizeof w);
    auto& slot = seg->slot[w.slot].who[7];
    wf::at(slot.pid).store(static_cast<std::int32_t>(getppid()));  // alive, and not us
    wf::at(slot.owner).store(0x0123456789abcdefull);                // nobody's lease
    EXPECT_EQ(ipc::importers(p), 0);
    EXPECT_EQ(wf::at(slot.owner).load(), 0u) << "the dead importer's slot is freed";
    const std::size_t before = ipc::deferred_frees();
    a.munmap(p, n);
    EXPECT_EQ(ipc::deferred_frees(), before) << "nothing to wait for";
    munmap(seg, sizeof(wf::segment));
  }
  {
    SCOPED_TRACE("a dead exporter's handle carrying a live pid");
    child exporter({"export", "4096", str(new_seed())});
    const ipc::handle real = ipc::handle::from_hex(exporter.line());
    exporter.kill_now();
    EXPECT_EQ(exporter.wait(), 128 + SIGKILL);
    wf::wire w;
    std::memcpy(&w, real.bytes.data(), sizeof w);
    w.pid = static_cast<std::int32_t>(getpid());
    w.checksum = wf::checksum(w);
    ipc::handle forged;
    std::memcpy(forged.bytes.data(), &w, sizeof w);
    EXPECT_MEMAREA_ERROR((void)ipc::open(forged), errc::invalid_handle);
    EXPECT_MEMAREA_ERROR((void)ipc::open(real), errc::invalid_handle);
    (void)ipc::remove_stale_objects();
    EXPECT_TRUE(objects_of(w.owner).empty());
  }
}

namespace {
/// How many of this process's descriptors are open on owner's lease.
int lease_descriptors(std::uint64_t owner) {
  char want[64];
  std::snprintf(want, sizeof want, "/dev/shm/memarea-lease-%016llx",
                static_cast<unsigned long long>(owner));
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    char link[64], target[256];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t len = readlink(link, target, sizeof target - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    if (std::strcmp(target, want) == 0) ++n;
  }
  return n;
}
}  // namespace

// Issue 14: a first import from an exporter opens no lease (three system calls off the first
// import): the background thread's next tick opens and tests it, and keeps it open.
TEST(IpcLiveness, AFirstImportLeavesTheExportersLeaseToTheNextTick) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 4096;
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(n), str(seed)});
  const ipc::handle h = ipc::handle::from_hex(exporter.line());
  const std::uint64_t owner = wire_of(h).owner;
  fake_clock clock;  // no tick runs unless this test advances the clock
  // A tick now (at the fake time): the next one is then due within a tick of it, whatever an
  // earlier test's fake timeline left scheduled, so that the advance below reaches it.
  housekeeper::run_due();
  ASSERT_EQ(lease_descriptors(owner), 0);
  void* p = ipc::open(h);
  EXPECT_EQ(lease_descriptors(owner), 0) << "the import opened the exporter's lease";
  clock.advance(std::chrono::seconds(1));
  housekeeper::run_due();
  EXPECT_EQ(lease_descriptors(owner), 1) << "the tick opens it and keeps it";
  EXPECT_EQ(holds(p, seed, n), true);
  ipc::close(p);
  exporter.close_stdin();
  EXPECT_EQ(exporter.wait(), 0);
}

// Issue 14: time is injected. A pause longer than every interval (an hour: past the tick and
// the sweep) changes nothing for live processes: the cached mapping stays and re-opens without
// a system call; one tick after the exporter dies, the cache lets go of it.
TEST(IpcLiveness, APauseLongerThanEveryIntervalChangesNothing) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  const std::size_t n = 12345;
  const std::uint64_t seed = new_seed();
  child exporter({"export", str(n), str(seed)});
  const ipc::handle h = ipc::handle::from_hex(exporter.line());
  ipc::collect();
  const std::size_t cached_before = ipc::cached_mappings();
  fake_clock clock;
  void* p = ipc::open(h);
  ipc::close(p);
  EXPECT_EQ(ipc::cached_mappings(), cached_before + 1);
  const auto ticks = housekeeper::stats().ticks;
  const auto sweeps = housekeeper::stats().sweeps;
  clock.advance(std::chrono::hours(1));
  housekeeper::run_due();
  EXPECT_GT(housekeeper::stats().ticks, ticks);
  EXPECT_GT(housekeeper::stats().sweeps, sweeps);
  EXPECT_EQ(ipc::cached_mappings(), cached_before + 1) << "a live exporter's mapping stays";
  void* again = ipc::open(h);
  EXPECT_EQ(again, p) << "served from the cache";
  EXPECT_TRUE(holds(again, seed, n));
  EXPECT_EQ(exporter.ask("importers"), "1");
  ipc::close(again);
  EXPECT_EQ(objects_of(owner_of(h), "ipc").size(), 1u) << "the sweep left a live exporter alone";
  // The exporter dies; the clock has not moved, so nothing is due and nothing changes...
  exporter.kill_now();
  EXPECT_EQ(exporter.wait(), 128 + SIGKILL);
  housekeeper::run_due();
  // ...until the next tick.
  clock.advance(housekeeper::kTick);
  housekeeper::run_due();
  EXPECT_EQ(ipc::cached_mappings(), cached_before) << "the dead exporter's mapping is dropped";
  EXPECT_MEMAREA_ERROR((void)ipc::open(h), errc::invalid_handle);
  (void)ipc::remove_stale_objects();
}

// Issue 19, must show: another user. A second uid (made here, as root) can neither remove our
// objects nor open our memory, and our sweep never touches its objects, even stale ones.
TEST(IpcLiveness, AnotherUserCanNeitherSweepNorOpenOurs) {
  MEMAREA_REQUIRE_DEVICES(1);
  if (geteuid() != 0) GTEST_SKIP() << "making a second uid needs root (this runs as uid " << geteuid() << ")";
  if (backend_name() != "sim") GTEST_SKIP() << "its child of fork() may not use CUDA or HIP";
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  constexpr uid_t kOther = 65534;  // nobody
  const area a(0);
  void* p = a.mmap(4096);
  const ipc::handle h = ipc::export_handle(p);
  const std::uint64_t me = lease::current();
  ASSERT_NE(me, 0u);
  // A stale owner of ours: a lease nobody holds, and an object of it.
  const std::uint64_t stale = 0x5eed5eed00000000ull | (static_cast<std::uint64_t>(getpid()) & 0xffffff);
  auto make = [](const std::string& name) {
    const int fd = lease::create_object(name, 4096);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  };
  char lease_name[64];
  std::snprintf(lease_name, sizeof lease_name, "/memarea-lease-%016llx",
                static_cast<unsigned long long>(stale));
  ASSERT_TRUE(make(lease_name));
  const std::string stale_object = lease::object_name("sim", stale, 42, 16);
  ASSERT_TRUE(make(stale_object));
  const std::size_t ours = objects_of(me).size();

  int report_pipe[2];
  ASSERT_EQ(pipe2(report_pipe, O_CLOEXEC), 0);
  int go_pipe[2];  // the child waits for it before it dies
  ASSERT_EQ(pipe2(go_pipe, O_CLOEXEC), 0);
  std::fflush(nullptr);
  forked other;
  other.pid = fork();
  ASSERT_GE(other.pid, 0);
  if (other.pid == 0) {
    alarm(60);
    ::close(report_pipe[0]);
    ::close(go_pipe[1]);
    if (setgroups(0, nullptr) != 0 || setgid(kOther) != 0 || setuid(kOther) != 0) _exit(77);
    // Our sweep must not touch root's objects, live or stale.
    const auto report = lease::sweep();
    for (const auto& name : report.removed)
      if (lease::owner_of(name) == me || lease::owner_of(name) == stale) _exit(10);
    // It cannot open root's memory: a clean status, no crash.
    try {
      (void)ipc::open(h);
      _exit(11);
    } catch (const error& e) {
      if (e.status() != errc::invalid_handle) _exit(12);
    }
    // It leaves stale objects of its own: its lease and a device allocation, then _exit.
    void* q = nullptr;
    try {
      q = area(0).mmap(4096);
    } catch (const error&) {
      _exit(13);
    }
    (void)q;
    const std::uint64_t theirs = lease::current();
    if (::write(report_pipe[1], &theirs, sizeof theirs) != sizeof theirs) _exit(14);
    char go = 0;
    if (::read(go_pipe[0], &go, 1) != 1) _exit(15);
    _exit(0);
  }
  ::close(report_pipe[1]);
  ::close(go_pipe[0]);
  std::uint64_t other_owner = 0;
  const bool reported = read_within(report_pipe[0], &other_owner, sizeof other_owner, kForkWait);
  ::close(report_pipe[0]);
  // Before it dies, we take its lease's sweep lock, as a sweep at work would: the sweeps of
  // other test processes' children (uid nobody too, and so entitled to remove its objects once
  // it is dead) leave them to us while we look.
  int their_lease = -1;
  if (reported) {
    char path[64];
    std::snprintf(path, sizeof path, "/dev/shm/memarea-lease-%016llx",
                  static_cast<unsigned long long>(other_owner));
    their_lease = ::open(path, O_RDWR | O_CLOEXEC);
    flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = lease::kSweepLockByte;
    fl.l_len = 1;
    EXPECT_TRUE(their_lease >= 0 && ::fcntl(their_lease, F_OFD_SETLK, &fl) == 0)
        << std::strerror(errno);
  }
  EXPECT_EQ(::write(go_pipe[1], "g", 1), 1);
  ::close(go_pipe[1]);
  const int status = other.wait(kForkWait);
  if (status == 77) GTEST_SKIP() << "this machine does not let root become uid " << kOther;
  ASSERT_EQ(status, 0) << "10: it removed our objects; 11: it opened our memory; 12: the "
                          "wrong status; 13: it could not allocate; 15: no word to die";
  EXPECT_EQ(objects_of(me).size(), ours) << "another user's sweep removed our objects";
  ASSERT_TRUE(reported);
  // Its stale objects (its lease, its device memory and, if its background thread made it
  // before the _exit, its IPC segment) are not ours to remove; our stale ones are.
  const std::set<std::string> theirs = objects_of(other_owner);
  EXPECT_EQ(objects_of(other_owner, "lease").size(), 1u);
  EXPECT_EQ(objects_of(other_owner, "sim").size(), 1u);
  for (const auto& name : theirs) {
    struct stat st {};
    ASSERT_EQ(stat(("/dev/shm/" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, kOther);
  }
  const auto report = lease::sweep();
  EXPECT_EQ(objects_of(other_owner), theirs) << "our sweep removed another user's objects";
  EXPECT_GE(report.left_alone, theirs.size());
  EXPECT_TRUE(objects_of(stale).empty()) << "our own stale objects were left";
  for (const auto& name : theirs) shm_unlink(("/" + name).c_str());
  if (their_lease >= 0) ::close(their_lease);
  a.munmap(p, 4096);
}

// Issue 19, finding 5: liveness across PID namespaces (containers that share /dev/shm). The
// importer runs as PID 1 of a new PID namespace, where our pid means nothing: it opens our
// memory (it used to be refused, and to remove our segment), it is counted, and once it is
// killed it is purged by its lease, whatever its pid reads here.
TEST(IpcLiveness, AnImporterInAnotherPidNamespace) {
  MEMAREA_REQUIRE_DEVICES(1);
  REQUIRE_HELPER();
  if (backend_name() != "sim") GTEST_SKIP() << "its child of fork() may not use CUDA or HIP";
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  const area a(0);
  const std::size_t n = 20000;
  void* p = a.mmap(n);
  const std::uint64_t seed = new_seed();
  fill(p, seed, n);
  const ipc::handle h = ipc::export_handle(p);
  int up[2], down[2];
  ASSERT_EQ(pipe2(up, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(down, O_CLOEXEC), 0);
  std::fflush(nullptr);
  forked outer;
  outer.pid = fork();
  ASSERT_GE(outer.pid, 0);
  if (outer.pid == 0) {
    alarm(120);
    ::close(up[0]);
    ::close(down[1]);
    if (unshare(CLONE_NEWPID) != 0) _exit(77);
    // The helper, its next child, is PID 1 of the new namespace.
    child holder({"hold", hex(h), str(n), str(seed)});
    char msg = holder.line() == "opened" ? 'o' : 'x';
    if (::write(up[1], &msg, 1) != 1) _exit(3);
    if (::read(down[0], &msg, 1) != 1) _exit(4);  // 'k': be killed
    holder.kill_now();
    _exit(holder.wait() == 128 + SIGKILL ? 0 : 5);
  }
  ::close(up[1]);
  ::close(down[0]);
  char msg = 0;
  const bool said = read_within(up[0], &msg, 1, kForkWait);
  if (!said) {
    const int st = outer.wait(kForkWait);
    ::close(up[0]);
    ::close(down[1]);
    a.munmap(p, n);
    if (st == 77) GTEST_SKIP() << "unshare(CLONE_NEWPID) is not allowed here (needs CAP_SYS_ADMIN)";
    FAIL() << "the namespaced importer said nothing; exit status " << st;
  }
  EXPECT_EQ(msg, 'o') << "the importer in another PID namespace could not open our memory";
  EXPECT_EQ(own_segments(), 1) << "our segment was removed";
  EXPECT_EQ(ipc::importers(p), 1);
  wf::segment* seg = map_segment_of(h);
  ASSERT_NE(seg, nullptr);
  wf::wire w;
  std::memcpy(&w, h.bytes.data(), sizeof w);
  bool pid_one = false;
  for (auto& s : seg->slot[w.slot].who)
    pid_one |= wf::at(s.owner).load() != 0 && wf::at(s.pid).load() == 1;
  EXPECT_TRUE(pid_one) << "the importer's slot should carry its own namespace's pid, 1";
  munmap(seg, sizeof(wf::segment));
  msg = 'k';
  ASSERT_EQ(::write(down[1], &msg, 1), 1);
  EXPECT_EQ(outer.wait(kForkWait), 0);
  ::close(up[0]);
  ::close(down[1]);
  EXPECT_EQ(ipc::importers(p), 0) << "a killed importer of another namespace is purged";
  ipc::collect();
  const std::size_t before = ipc::deferred_frees();
  a.munmap(p, n);
  EXPECT_EQ(ipc::deferred_frees(), before) << "nothing to wait for";
}
