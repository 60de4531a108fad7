// base/fault_guard: a watched mapping whose file is cut short reads zeros and says so; a fault
// anywhere else reaches the handler that was there before, or kills as it would have.
#include "base/fault_guard.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fg = memarea::detail::fault_guard;

namespace {

/// What a child that took a SIGBUS nobody handles ends with: killed by it, or, under ASan (whose
/// handler memarea passes it to), ASan's report and exit status 1.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kDiedOfSigbus = 1;
#else
constexpr int kDiedOfSigbus = 128 + SIGBUS;
#endif

constexpr std::size_t kLen = 4 * 4096;

/// A shm file of kLen bytes filled with 0x5a, mapped shared; its descriptor stays open.
struct shared_file {
  std::string name;
  int fd = -1;
  unsigned char* p = nullptr;
  shared_file() {
    static int made = 0;
    name = "/memarea-test-fault-guard-" + std::to_string(getpid()) + "-" + std::to_string(++made);
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, kLen) != 0) return;
    void* m = mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return;
    p = static_cast<unsigned char*>(m);
    std::memset(p, 0x5a, kLen);
  }
  ~shared_file() {
    if (p) munmap(p, kLen);
    if (fd >= 0) ::close(fd);
    shm_unlink(name.c_str());
  }
};

volatile sig_atomic_t g_user_handler_ran = 0;
void user_handler(int) {
  g_user_handler_ran = 1;
  _exit(42);
}

/// Runs f in a child of fork() and returns its exit code, or 128 + the signal that ended it.
template <class F>
int in_child(F f) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    f();
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

TEST(FaultGuard, AWatchedMappingCutShortReadsZerosAndSaysSo) {
  shared_file f;
  ASSERT_NE(f.p, nullptr);
  const int id = fg::watch(f.p, kLen);
  ASSERT_GE(id, 0);
  EXPECT_FALSE(fg::damaged(id));
  EXPECT_EQ(f.p[kLen - 1], 0x5a);
  ASSERT_EQ(ftruncate(f.fd, 4096), 0);  // the first page stays in the file
  volatile unsigned char* v = f.p;
  EXPECT_EQ(v[4096 + 10], 0) << "past the file's end: a zero page, not SIGBUS";
  EXPECT_TRUE(fg::damaged(id));
  EXPECT_EQ(v[5], 0x5a) << "the page still in the file is still the file's";
  v[3 * 4096] = 7;  // writable
  EXPECT_EQ(v[3 * 4096], 7);
  fg::unwatch(id);
  EXPECT_FALSE(fg::damaged(-1));
}

TEST(FaultGuard, AFaultOutsideWatchedRangesStillKills) {
  shared_file watched, unwatched;
  ASSERT_NE(watched.p, nullptr);
  ASSERT_NE(unwatched.p, nullptr);
  const int id = fg::watch(watched.p, kLen);  // the handler is installed
  ASSERT_GE(id, 0);
  const int code = in_child([&] {
    (void)!ftruncate(unwatched.fd, 0);
    volatile unsigned char* v = unwatched.p;
    (void)v[100];
  });
  EXPECT_EQ(code, kDiedOfSigbus);
  fg::unwatch(id);
}

TEST(FaultGuard, ASigbusSentByAnotherProcessStillKills) {
  shared_file watched;
  ASSERT_NE(watched.p, nullptr);
  const int id = fg::watch(watched.p, kLen);
  ASSERT_GE(id, 0);
  EXPECT_EQ(in_child([] { raise(SIGBUS); }), kDiedOfSigbus);
  fg::unwatch(id);
}

// Run by the next test in a fresh process (this binary again), where memarea's handler is not
// installed yet: the program's own SIGBUS handler first, then memarea's first watch installs
// memarea's over it; a fault outside the watched range must reach the program's handler.
TEST(FaultGuard, ChildProgramHandlerFirst) {
  if (!std::getenv("MEMAREA_FAULT_GUARD_CHILD")) GTEST_SKIP() << "run by the test below";
  shared_file watched, unwatched;
  if (!watched.p || !unwatched.p) _exit(3);
  struct sigaction sa {};
  sa.sa_handler = user_handler;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
  if (fg::watch(watched.p, kLen) < 0) _exit(4);
  (void)!ftruncate(unwatched.fd, 0);
  volatile unsigned char* v = unwatched.p;
  (void)v[100];
  _exit(5);  // the fault was swallowed
}

TEST(FaultGuard, AFaultOutsideReachesTheHandlerInstalledBefore) {
  const int code = in_child([] {
    setenv("MEMAREA_FAULT_GUARD_CHILD", "1", 1);
    execl("/proc/self/exe", "fault_guard_child",
          "--gtest_filter=FaultGuard.ChildProgramHandlerFirst", static_cast<char*>(nullptr));
    _exit(127);
  });
  EXPECT_EQ(code, 42) << "3-5: the child's own failure; 128+7: killed by SIGBUS";
}
