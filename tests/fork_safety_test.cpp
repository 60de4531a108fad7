// The fork() safety of memarea's locks (src/base/fork_safety.hpp): the order check, the handlers
// that hold every lock across fork() and renew them in the child, and lazily made objects.
#include "base/fork_safety.hpp"
#include "testing/memarea_testing.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

using namespace memarea::detail;
namespace mt = memarea::detail::testing;
using namespace std::chrono_literals;

namespace {

/// Forks; the child runs body() and exits with its result (SIGALRM after 60 s: a hang). Returns
/// the child's exit status, or 128 + the signal that ended it.
template <class Body>
int in_child(Body body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    _exit(body());
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/// Participants that write what they were asked into one log.
std::vector<std::string>* g_log = nullptr;
struct logging_participant final : fork_participant {
  logging_participant(lock_rank r, std::string name) noexcept
      : fork_participant(r), name_(std::move(name)) {}
  void fork_prepare() noexcept override { g_log->push_back("prepare " + name_); }
  void fork_parent() noexcept override { g_log->push_back("parent " + name_); }
  void fork_child() noexcept override { g_log->push_back("child " + name_); }
  std::string name_;
};

}  // namespace

TEST(ForkSafety, HandlersRunInRankOrderAndReverse) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  std::vector<std::string> log;
  g_log = &log;
  {
    // Made out of order: the list sorts them by rank.
    logging_participant high(lock_rank::driver, "driver");
    logging_participant low(lock_rank::peer, "peer");
    logging_participant mid(lock_rank::registry, "registry");
    const std::uint64_t before = mt::forks_prepared();
    const int status = in_child([&] {
      const std::vector<std::string> want = {"prepare peer",   "prepare registry",
                                             "prepare driver", "child driver",
                                             "child registry", "child peer"};
      std::vector<std::string> mine;
      for (const auto& l : log)
        if (l.find("peer") != std::string::npos || l.find("registry") != std::string::npos ||
            l.find("driver") != std::string::npos)
          mine.push_back(l);
      return mine == want ? 0 : 1;
    });
    EXPECT_EQ(status, 0) << "the child saw its handlers in another order";
    EXPECT_EQ(mt::forks_prepared(), before + 1);
    const std::vector<std::string> want = {"prepare peer",  "prepare registry", "prepare driver",
                                           "parent driver", "parent registry",  "parent peer"};
    EXPECT_EQ(log, want);
  }
  g_log = nullptr;
}

TEST(ForkSafety, LockHeldByAnotherThreadAtForkIsFreeInTheChild) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  ranked_mutex m(lock_rank::registry);
  std::atomic<bool> holding{false};
  std::thread holder([&] {
    std::lock_guard lock(m);
    holding.store(true);
    std::this_thread::sleep_for(100ms);  // fork() below waits for this section to end
  });
  while (!holding.load()) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  const int status = in_child([&] {
    std::lock_guard lock(m);  // hangs (SIGALRM) if the holder's lock came along
    return 0;
  });
  const auto waited = std::chrono::steady_clock::now() - start;
  holder.join();
  EXPECT_EQ(status, 0);
  EXPECT_GE(waited, 50ms) << "fork() did not wait for the section that held the lock";
}

TEST(ForkSafety, ReaderAndWriterLocksAtForkAreFreeInTheChild) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  ranked_shared_mutex m(lock_rank::registry);
  std::atomic<int> readers{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] {
      while (!stop.load()) {
        std::shared_lock lock(m);
        readers.fetch_add(1);
      }
    });
  threads.emplace_back([&] {
    while (!stop.load()) std::lock_guard lock(m);
  });
  while (readers.load() < 100) std::this_thread::yield();
  for (int round = 0; round < 50; ++round) {
    const int status = in_child([&] {
      {
        std::lock_guard lock(m);  // as a writer: no reader or writer of the parent is left
      }
      std::shared_lock lock(m);
      return 0;
    });
    ASSERT_EQ(status, 0) << "round " << round;
  }
  stop.store(true);
  for (auto& t : threads) t.join();
}

TEST(ForkSafety, MadeOnceMakesOneObjectForAllThreads) {
  std::atomic<int> made{0};
  auto get = [&]() -> int& {
    return made_once([&] {
      made.fetch_add(1);
      std::this_thread::sleep_for(10ms);  // others arrive meanwhile
      return new int(42);
    });
  };
  std::vector<std::thread> threads;
  std::vector<int*> seen(8, nullptr);
  for (int i = 0; i < 8; ++i) threads.emplace_back([&, i] { seen[i] = &get(); });
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 1);
  for (int* p : seen) EXPECT_EQ(p, seen[0]);
  EXPECT_EQ(*seen[0], 42);
}

TEST(ForkSafety, ForkWaitsForAnObjectBeingMade) {
#ifdef __SANITIZE_THREAD__
  GTEST_SKIP() << "TSan cannot start threads in a child of a multi-threaded fork";
#endif
  std::atomic<bool> making{false};
  std::atomic<bool> finish{false};
  auto get = [&]() -> int& {
    return made_once([&] {
      making.store(true);
      while (!finish.load()) std::this_thread::sleep_for(1ms);
      return new int(7);
    });
  };
  std::thread maker([&] { (void)get(); });
  while (!making.load()) std::this_thread::yield();
  std::thread release([&] {
    std::this_thread::sleep_for(50ms);
    finish.store(true);
  });
  // fork() waits until the object is made: the child finds it whole, never half-made.
  const int status = in_child([&] { return get() == 7 ? 0 : 1; });
  maker.join();
  release.join();
  EXPECT_EQ(status, 0);
}

TEST(ForkSafety, OutOfOrderAcquisitionIsCaughtInDebugBuilds) {
  if (!mt::lock_order_checked()) GTEST_SKIP() << "the lock order is checked in Debug builds only";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ranked_mutex low(lock_rank::peer), high(lock_rank::registry);
  {
    std::lock_guard a(low);
    std::lock_guard b(high);  // in order: fine
  }
  EXPECT_DEATH(
      {
        std::lock_guard b(high);
        std::lock_guard a(low);
      },
      "lock order violated: taking a lock of rank peer \\(40\\) while holding one of rank "
      "registry \\(70\\)");
  EXPECT_DEATH(
      {
        std::lock_guard b(high);
        fork_init_guard init;
      },
      "building a lazily made object while holding a lock of rank registry");
  ranked_shared_mutex shared(lock_rank::ipc_import);
  EXPECT_DEATH(
      {
        std::lock_guard b(high);
        std::shared_lock a(shared);
      },
      "taking a lock of rank ipc_import");
}
