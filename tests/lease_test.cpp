// Leases (base/lease): who owns memarea's objects in /dev/shm and whether it lives; the sweep;
// and the background thread's schedule under an injected clock (base/housekeeper).
#include "base/housekeeper.hpp"
#include "testing/memarea_testing.hpp"
#include "base/lease.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace lease = memarea::detail::lease;
namespace housekeeper = memarea::detail::housekeeper;

namespace {

std::string hex16(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

bool exists(const std::string& name) {
  struct stat st {};
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

/// Makes an object of this user as memarea does (with its stamp); true when it did.
bool make(const std::string& name) {
  const int fd = lease::create_object(name, 4096);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

/// A lock of one byte of a lease, at byte `at`.
flock one_byte(short type, off_t at) {
  flock fl{};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  return fl;
}

/// Takes the sweep byte of the lease behind fd as a sweep does (another process's sweep may
/// hold it for a moment while it finds the owner alive): whether it got it within 5 s.
bool take_sweep_byte(int fd) {
  flock fl = one_byte(F_WRLCK, lease::kSweepLockByte);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    fl = one_byte(F_WRLCK, lease::kSweepLockByte);
  }
  return true;
}

/// A child of fork() that makes its lease and one object, tells its owner through a pipe, and
/// then exits with _exit (no cleanup) or waits for its stdin to close (alive).
struct lease_child {
  pid_t pid = -1;
  std::uint64_t owner = 0;
  std::string object;
  int hold = -1;  // closing it lets a waiting child exit

  explicit lease_child(bool stay_alive) {
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) != 0 || pipe2(down, O_CLOEXEC) != 0) return;
    pid = fork();
    if (pid == 0) {
      ::close(up[0]);
      ::close(down[1]);
      int err = 0;
      const std::uint64_t o = lease::own(&err);
      const std::string name = lease::object_name("test", o, 7, 16);
      if (o == 0 || !make(name)) _exit(2);
      if (::write(up[1], &o, sizeof o) != sizeof o) _exit(3);
      if (stay_alive) {
        char c;
        while (::read(down[0], &c, 1) > 0) {
        }
      }
      _exit(0);
    }
    ::close(up[1]);
    ::close(down[0]);
    hold = down[1];
    if (::read(up[0], &owner, sizeof owner) != sizeof owner) owner = 0;
    ::close(up[0]);
    object = lease::object_name("test", owner, 7, 16);
  }
  int finish() {
    if (hold >= 0) ::close(hold);
    hold = -1;
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ~lease_child() {
    if (hold >= 0) finish();
    shm_unlink(object.c_str());
    shm_unlink(("/memarea-lease-" + hex16(owner)).c_str());
  }
};

}  // namespace

TEST(Lease, NamesCarryTheOwner) {
  EXPECT_EQ(lease::object_name("sim", 0xabcull, 0x12345678ull, 8),
            "/memarea-sim-0000000000000abc-12345678");
  EXPECT_EQ(lease::object_name("ipc", ~0ull, 1, 16),
            "/memarea-ipc-ffffffffffffffff-0000000000000001");
  EXPECT_EQ(lease::owner_of("/memarea-sim-0000000000000abc-12345678"), 0xabcull);
  EXPECT_EQ(lease::owner_of("memarea-lease-00000000000000ff"), 0xffull);
  // Not memarea's, or of the old pid-named formats: no owner.
  for (const char* name : {"memarea-sim-12345-00000000000000ff", "memarea-ipc-1-2-3", "memarea-",
                           "other-sim-0000000000000abc-1", "memarea-SIM-0000000000000abc-1",
                           "memarea-sim-0000000000000abcx", "memarea-sim-000000000000abc", ""})
    EXPECT_EQ(lease::owner_of(name), 0u) << name;
}

TEST(Lease, OwnIsOnePerProcessAndTestsAlive) {
  int err = 0;
  const std::uint64_t me = lease::own(&err);
  ASSERT_NE(me, 0u) << err;
  EXPECT_EQ(lease::own(&err), me);
  EXPECT_EQ(lease::current(), me);
  EXPECT_TRUE(exists("/memarea-lease-" + hex16(me)));
  // Another descriptor of our own lease sees our lock (OFD locks are per open file).
  EXPECT_EQ(lease::test_owner(me), lease::holder::alive);
  EXPECT_EQ(lease::test_owner(0x0123456789abcdefull), lease::holder::gone) << "no such lease";
  EXPECT_EQ(lease::open(0), -ENOENT);
  // The sweep never removes our own objects.
  const std::string mine = lease::object_name("test", me, 1, 16);
  ASSERT_TRUE(make(mine));
  (void)lease::sweep();
  EXPECT_TRUE(exists(mine));
  shm_unlink(mine.c_str());
}

TEST(Lease, AForkChildHasItsOwnAndItsDeathIsSeen) {
  int err = 0;
  const std::uint64_t me = lease::own(&err);
  ASSERT_NE(me, 0u);
  lease_child alive(true);
  ASSERT_NE(alive.owner, 0u);
  EXPECT_NE(alive.owner, me) << "a child of fork() does not reuse its parent's lease";
  EXPECT_EQ(lease::test_owner(alive.owner), lease::holder::alive);
  EXPECT_EQ(lease::test_owner(me), lease::holder::alive);
  // A sweep leaves a live owner's objects.
  (void)lease::sweep();
  EXPECT_TRUE(exists(alive.object));
  EXPECT_EQ(alive.finish(), 0);
  // It exited without removing anything: gone, and the sweep removes its lease and object.
  EXPECT_EQ(lease::test_owner(alive.owner), lease::holder::gone);
  const auto dry = lease::sweep(true);
  // Other test processes sweep /dev/shm too. A sweep holds the lease's lock while it removes,
  // and removes the lease last: if we can take the lock and the lease is still there, no sweep
  // finished, so the object must be there and the dry run must have listed it.
  const std::string lease_name = "/memarea-lease-" + hex16(alive.owner);
  const int held = lease::open(alive.owner);
  flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (held >= 0 && fcntl(held, F_OFD_SETLK, &fl) == 0 && exists(lease_name)) {
    EXPECT_TRUE(exists(alive.object)) << "a dry run removes nothing";
    bool listed = false;
    for (const auto& n : dry.removed) listed |= "/" + n == alive.object;
    EXPECT_TRUE(listed);
  }
  if (held >= 0) ::close(held);
  (void)lease::sweep();
  EXPECT_FALSE(exists(alive.object));
  EXPECT_FALSE(exists("/memarea-lease-" + hex16(alive.owner)));
}

// A sweep holds a dead owner's lock byte (after the lease's sweep byte) while it removes the
// owner's objects: a liveness test at that moment must not take the sweep for the owner. It
// waits for the sweep as a second sweep does and then answers gone; a sweep that holds on for
// longer than a sweep waits leaves it unknown, never alive. (Here the sweep is this test: it
// takes the sweep byte while the child lives, so that no other process's sweep gets there.)
TEST(Lease, ALivenessTestDoesNotTakeASweepAtWorkForTheOwner) {
  lease_child child(true);
  ASSERT_NE(child.owner, 0u);
  const int sweep = lease::open(child.owner);
  ASSERT_GE(sweep, 0);
  ASSERT_TRUE(take_sweep_byte(sweep)) << "another sweep held the sweep byte for 5 s";
  EXPECT_NE(lease::test_owner(child.owner), lease::holder::gone) << "a live owner taken for gone";
  EXPECT_EQ(child.finish(), 0);
  // The owner's byte, free now that the owner is dead: the sweep at work.
  flock owner_byte = one_byte(F_WRLCK, 0);
  ASSERT_EQ(fcntl(sweep, F_OFD_SETLK, &owner_byte), 0);
  EXPECT_NE(lease::test_owner(child.owner), lease::holder::alive)
      << "a sweep at work taken for the owner";
  std::thread done([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ::close(sweep);  // drops both locks, as the sweep does when it is done
  });
  EXPECT_EQ(lease::test_owner(child.owner), lease::holder::gone);
  done.join();
}

// Another user's lease (root's `memarea ps`) is opened read-only: its liveness is read from the
// locks without taking one, and a sweep at work on it is answered unknown at once, its lock
// left as it was. The user's own lease opens read-write, as a sweep's does.
TEST(Lease, AReadOnlyDescriptorOnlyLooksAtTheLocks) {
  lease_child child(true);
  ASSERT_NE(child.owner, 0u);
  const int own = lease::open_for_reading(child.owner, false);
  ASSERT_GE(own, 0);
  EXPECT_EQ(fcntl(own, F_GETFL) & O_ACCMODE, O_RDWR) << "the user's own lease";
  ::close(own);
  const std::string path = "/dev/shm/memarea-lease-" + hex16(child.owner);
  const int ro = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ro, 0);
  EXPECT_EQ(lease::test(ro), lease::holder::alive);
  const int sweep = lease::open(child.owner);
  ASSERT_GE(sweep, 0);
  ASSERT_TRUE(take_sweep_byte(sweep)) << "another sweep held the sweep byte for 5 s";
  const flock fl = one_byte(F_WRLCK, lease::kSweepLockByte);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(lease::test(ro), lease::holder::unknown) << "the sweep byte is held";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50))
      << "a read-only look waits for nobody";
  flock probe = fl;
  ASSERT_EQ(fcntl(ro, F_OFD_GETLK, &probe), 0);
  EXPECT_EQ(probe.l_type, F_WRLCK) << "the sweep's lock is still held";
  ::close(sweep);
  EXPECT_EQ(child.finish(), 0);
  EXPECT_EQ(lease::test(ro), lease::holder::gone);
  ::close(ro);
}

TEST(Lease, ObjectsWithoutALeaseAreRemovedAndOddFilesAreNot) {
  const std::uint64_t orphan = 0x0badc0de00000000ull | static_cast<std::uint64_t>(getpid());
  const std::string object = lease::object_name("test", orphan, 3, 16);
  ASSERT_TRUE(make(object));
  (void)lease::sweep();
  EXPECT_FALSE(exists(object)) << "an object whose owner's lease is gone";
  // A lease that is a directory, a FIFO or a symlink is never trusted: its objects stay.
  const std::uint64_t odd = orphan + 1;
  const std::string lease_path = "/dev/shm/memarea-lease-" + hex16(odd);
  const std::string odd_object = lease::object_name("test", odd, 4, 16);
  ASSERT_EQ(mkfifo(lease_path.c_str(), 0600), 0);
  ASSERT_TRUE(make(odd_object));
  EXPECT_EQ(lease::open(odd), -EPERM);
  (void)lease::sweep();
  EXPECT_TRUE(exists(odd_object)) << "removed on the word of a FIFO";
  unlink(lease_path.c_str());
  ASSERT_EQ(symlink("/dev/null", lease_path.c_str()), 0);
  EXPECT_LT(lease::open(odd), 0);
  (void)lease::sweep();
  EXPECT_TRUE(exists(odd_object)) << "removed on the word of a symlink";
  unlink(lease_path.c_str());
  shm_unlink(odd_object.c_str());
}

// The sweep (and `memarea ipc gc`) removes only what memarea provably made: a regular file of
// this user carrying the stamp of its own name. A user's file that is merely named like
// memarea's, a copy of another object's stamp, a symlink (to a stamped object or anywhere) and
// a file open to others all stay, even when their owner's lease is gone.
TEST(Lease, TheSweepRemovesOnlyWhatMemareaMadeAndNeverALink) {
  const std::uint64_t dead = 0x0dead0aa00000000ull | static_cast<std::uint64_t>(getpid());
  const std::string dir = "/dev/shm";
  // A file of the user's own, named like memarea's: its owner has no lease.
  const std::string notes = "/memarea-notes-" + hex16(dead) + "-user-data";
  {
    const int fd = shm_open(notes.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "keep me", 7), 7);
    ::close(fd);
  }
  // A stamped object (memarea's), and a file carrying a copy of its stamp under another name.
  const std::string real = lease::object_name("sim", dead, 1, 16);
  ASSERT_TRUE(make(real));
  const std::string copied = lease::object_name("sim", dead, 2, 16);
  {
    const int from = shm_open(real.c_str(), O_RDONLY | O_CLOEXEC, 0);
    const int to = shm_open(copied.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(from, 0);
    ASSERT_GE(to, 0);
    char buf[8192];
    const ssize_t n = pread(from, buf, sizeof buf, 0);
    ASSERT_EQ(n, static_cast<ssize_t>(sizeof buf));
    ASSERT_EQ(pwrite(to, buf, sizeof buf, 0), n);
    ::close(from);
    ::close(to);
  }
  // A stamped object open to others (mode 0644) is not one memarea made.
  const std::string open_to_others = lease::object_name("sim", dead, 3, 16);
  ASSERT_TRUE(make(open_to_others));
  ASSERT_EQ(chmod((dir + open_to_others).c_str(), 0644), 0);
  // Links named like memarea's objects: to a stamped object of a live owner (ours), and to a
  // user file elsewhere.
  int err = 0;
  const std::uint64_t me = lease::own(&err);
  ASSERT_NE(me, 0u);
  const std::string target = lease::object_name("test", me, 9, 16);
  ASSERT_TRUE(make(target));
  const std::string link_to_object = lease::object_name("sim", dead, 4, 16);
  const std::string link_to_file = lease::object_name("sim", dead, 5, 16);
  ASSERT_EQ(symlink((dir + target).c_str(), (dir + link_to_object).c_str()), 0);
  ASSERT_EQ(symlink((dir + notes).c_str(), (dir + link_to_file).c_str()), 0);

  const auto dry = lease::sweep(true);
  auto listed = [&](const std::string& name) {
    return std::find(dry.removed.begin(), dry.removed.end(), name.substr(1)) != dry.removed.end();
  };
  EXPECT_FALSE(listed(notes));
  EXPECT_FALSE(listed(copied));
  EXPECT_FALSE(listed(open_to_others));
  EXPECT_FALSE(listed(link_to_object));
  EXPECT_FALSE(listed(link_to_file));
  (void)lease::sweep();
  EXPECT_TRUE(exists(notes)) << "a user's file named like memarea's was removed";
  EXPECT_TRUE(exists(copied)) << "a copy of another object's stamp was taken for proof";
  EXPECT_TRUE(exists(open_to_others)) << "a file open to others was removed";
  struct stat st {};
  EXPECT_EQ(lstat((dir + link_to_object).c_str(), &st), 0) << "a symlink was removed";
  EXPECT_EQ(lstat((dir + link_to_file).c_str(), &st), 0) << "a symlink was removed";
  EXPECT_TRUE(exists(target)) << "a symlink was followed";
  EXPECT_FALSE(exists(real)) << "memarea's own object of a dead owner was left";
  for (const auto& n : {notes, copied, open_to_others, target}) shm_unlink(n.c_str());
  unlink((dir + link_to_object).c_str());
  unlink((dir + link_to_file).c_str());
}

// A lease open to others (or of another user) is no lease: open() refuses it, and nobody can
// pass for a live owner through it.
TEST(Lease, ALeaseOpenToOthersIsRefused) {
  const std::uint64_t owner = 0x0bad1ea500000000ull | static_cast<std::uint64_t>(getpid());
  const std::string name = "/memarea-lease-" + hex16(owner);
  ASSERT_TRUE(make(name));
  const int fd = lease::open(owner);
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  ASSERT_EQ(chmod(("/dev/shm" + name).c_str(), 0666), 0);
  EXPECT_EQ(lease::open(owner), -EPERM);
  shm_unlink(name.c_str());
}

namespace {
std::atomic<std::int64_t> g_now_ns{0};
housekeeper::clock_type::time_point fake_now() noexcept {
  return housekeeper::clock_type::time_point(std::chrono::nanoseconds(g_now_ns.load()));
}
std::atomic<int> g_task_runs{0};
void counting_task() noexcept { g_task_runs.fetch_add(1); }
}  // namespace

TEST(Housekeeper, ScheduleFollowsTheInjectedClock) {
  g_now_ns.store(housekeeper::clock_type::now().time_since_epoch().count());
  memarea::detail::testing::set_housekeeper_clock(&fake_now);
  housekeeper::add(&counting_task);
  housekeeper::add(&counting_task);  // once
  housekeeper::start();
  // The thread may run what is due right now; after that, nothing is due until time moves.
  housekeeper::run_due();
  const int runs = g_task_runs.load();
  const auto sweeps = housekeeper::stats().sweeps;
  EXPECT_GE(sweeps, 1u) << "the first round sweeps";
  housekeeper::run_due();
  housekeeper::run_due();
  EXPECT_EQ(g_task_runs.load(), runs);
  EXPECT_EQ(housekeeper::stats().sweeps, sweeps);
  g_now_ns.fetch_add(std::chrono::nanoseconds(housekeeper::kTick).count());
  housekeeper::run_due();
  EXPECT_EQ(g_task_runs.load(), runs + 1) << "one tick, one run (not one per caller)";
  EXPECT_EQ(housekeeper::stats().sweeps, sweeps);
  // A pause longer than every interval: one run of each, not one per missed interval.
  g_now_ns.fetch_add(std::chrono::nanoseconds(std::chrono::hours(2)).count());
  housekeeper::run_due();
  housekeeper::run_due();
  EXPECT_EQ(g_task_runs.load(), runs + 2);
  EXPECT_EQ(housekeeper::stats().sweeps, sweeps + 1);
  EXPECT_TRUE(housekeeper::stats().running);
  memarea::detail::testing::set_housekeeper_clock(nullptr);
}

namespace {
std::atomic<int> g_late_task_runs{0};
void late_task() noexcept { g_late_task_runs.fetch_add(1); }
}  // namespace

// A task added between ticks (IPC's preparation, added by the first device allocation) is due
// in the next round, not a tick later: on sim the thread starts before any task exists, and
// the first export used to find its segment not made yet.
TEST(Housekeeper, ATaskAddedBetweenTicksIsDueAtOnce) {
  g_now_ns.store(housekeeper::clock_type::now().time_since_epoch().count());
  memarea::detail::testing::set_housekeeper_clock(&fake_now);
  housekeeper::add(&counting_task);
  housekeeper::run_due();  // the tick runs; the next is kTick away on this clock
  const int runs = g_task_runs.load();
  housekeeper::run_due();
  EXPECT_EQ(g_task_runs.load(), runs) << "nothing due until the clock moves";
  const int late_runs = g_late_task_runs.load();
  housekeeper::add(&late_task);
  housekeeper::run_due();
  housekeeper::run_due();
  EXPECT_EQ(g_late_task_runs.load(), late_runs + 1) << "the new task ran once, with no time passed";
  EXPECT_EQ(g_task_runs.load(), runs + 1) << "the others ran with it";
  memarea::detail::testing::set_housekeeper_clock(nullptr);
}

TEST(Housekeeper, TheThreadRunsTasksOnItsOwn) {
  memarea::detail::testing::set_housekeeper_clock(nullptr);
  housekeeper::add(&counting_task);
  housekeeper::start();
  const int runs = g_task_runs.load();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (g_task_runs.load() < runs + 3 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(g_task_runs.load(), runs + 3) << "no ticks from the background thread";
}

namespace {
struct posted_job {
  std::atomic<int> runs{0};
  std::atomic<bool> on_keeper{false};
  std::atomic<bool> release{true};
};
void run_posted_job(void* arg) noexcept {
  auto* j = static_cast<posted_job*>(arg);
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  j->on_keeper.store(std::string(name) == "memarea-keeper");
  while (!j->release.load()) std::this_thread::yield();
  j->runs.fetch_add(1);
}
}  // namespace

// A posted job (IPC's first import maps the exporter's segment this way) runs on the keeper's
// thread; a full queue refuses instead of allocating or waiting, and the same job posted again
// while queued takes no second place.
TEST(Housekeeper, APostedJobRunsOnTheKeepersThread) {
  memarea::detail::testing::set_housekeeper_clock(nullptr);
  housekeeper::start();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto wait_until = [&](auto done) {
    while (!done() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    return done();
  };
  posted_job job;
  ASSERT_TRUE(housekeeper::post(&run_posted_job, &job));
  ASSERT_TRUE(wait_until([&] { return job.runs.load() == 1; }));
  EXPECT_TRUE(job.on_keeper.load());
  // Held on the keeper: the queue fills up (8 jobs) and the ninth is refused.
  posted_job held;
  held.release.store(false);
  ASSERT_TRUE(housekeeper::post(&run_posted_job, &held));
  ASSERT_TRUE(wait_until([&] { return held.on_keeper.load(); }));
  posted_job queued[9];
  EXPECT_TRUE(housekeeper::post(&run_posted_job, &queued[0]));
  EXPECT_TRUE(housekeeper::post(&run_posted_job, &queued[0]));  // queued already: one place
  int accepted = 1;
  for (int i = 1; i < 9; ++i) accepted += housekeeper::post(&run_posted_job, &queued[i]);
  EXPECT_EQ(accepted, 8);
  held.release.store(true);
  // Drained before the jobs' objects go out of scope.
  ASSERT_TRUE(wait_until([&] {
    int runs = 0;
    for (int i = 0; i < 8; ++i) runs += queued[i].runs.load();
    return runs == 8;
  }));
  EXPECT_EQ(queued[0].runs.load(), 1);
  EXPECT_EQ(queued[8].runs.load(), 0);
  EXPECT_EQ(held.runs.load(), 1);
}

// post's only_when_idle (a first IPC import's segment job): refused while the thread runs a job
// or a round, accepted once it waits for its next round; idle() says which.
TEST(Housekeeper, OnlyAnIdleThreadTakesAJobThatAsksForOne) {
  memarea::detail::testing::set_housekeeper_clock(nullptr);
  housekeeper::start();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto wait_until = [&](auto done) {
    while (!done() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    return done();
  };
  ASSERT_TRUE(wait_until([] { return housekeeper::idle(); }));
  posted_job first;
  ASSERT_TRUE(housekeeper::post(&run_posted_job, &first, true));
  ASSERT_TRUE(wait_until([&] { return first.runs.load() == 1; }));
  // Busy with a job of its own: not idle, and a job that asks for an idle thread is refused.
  posted_job held;
  held.release.store(false);
  ASSERT_TRUE(housekeeper::post(&run_posted_job, &held));
  ASSERT_TRUE(wait_until([&] { return held.on_keeper.load(); }));
  EXPECT_FALSE(housekeeper::idle());
  posted_job refused;
  EXPECT_FALSE(housekeeper::post(&run_posted_job, &refused, true));
  held.release.store(true);
  ASSERT_TRUE(wait_until([&] { return held.runs.load() == 1; }));
  // Idle again (its round, if one was due, done): accepted.
  ASSERT_TRUE(wait_until([] { return housekeeper::idle(); }));
  posted_job later;
  ASSERT_TRUE(housekeeper::post(&run_posted_job, &later, true));
  ASSERT_TRUE(wait_until([&] { return later.runs.load() == 1; }));
  EXPECT_EQ(refused.runs.load(), 0);
}
