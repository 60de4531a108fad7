// Where a re-open of a cached IPC mapping spends its time after a pause: with a second thread of
// the importer re-opening another cached handle every N ms (default 2) the thread that paused
// finds the re-open's code and tables warm. Sim backend; the importer is a child of fork(), the
// exporter its parent. Prints min-median-max of 15 re-opens 70 ms apart, without and with the
// warming thread.
// Build (from the repository root, after the default preset's build):
//   g++ -O2 -std=c++20 -Iinclude bench/experiments/reopen_warmer.cpp -Lbuild/default/src
//       -lmemarea -Wl,-rpath,$PWD/build/default/src -o /tmp/reopen_warmer   (one line)
//   MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=1 /tmp/reopen_warmer [N]
// Seen on the development machine (2026-11-27, 2 vCPUs, a CI run beside it), medians: alone
// 9.2-9.4 us; warmed every 2 ms 2.8-3.1 us, every 10 ms 3.5 us, every 30 ms 6.0 us (the bench's
// user-side hash map: 3.1 us there). The cost after a pause is the path's code and data coming
// back into the caches, not its work (0.08 us back to back).
#include <memarea/ipc.hpp>
#include <memarea/memarea.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  using clock_type = std::chrono::steady_clock;
  const int every_ms = argc > 1 ? std::atoi(argv[1]) : 2;
  memarea::area a(0);
  memarea::buffer b1 = a.allocate(1 << 20), b2 = a.allocate(1 << 20);
  const auto timed = memarea::ipc::export_handle(b1.data());
  const auto other = memarea::ipc::export_handle(b2.data());
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    memarea::ipc::close(memarea::ipc::open(timed, 0));  // both cached, closed
    memarea::ipc::close(memarea::ipc::open(other, 0));
    for (bool warm : {false, true}) {
      std::atomic<bool> stop{false};
      std::thread warmer;
      if (warm)
        warmer = std::thread([&] {
          while (!stop.load()) {
            memarea::ipc::close(memarea::ipc::open(other, 0));
            std::this_thread::sleep_for(std::chrono::milliseconds(every_ms));
          }
        });
      std::vector<double> t;
      for (int r = 0; r < 15; ++r) {
        std::this_thread::sleep_for(std::chrono::milliseconds(70));
        const auto t0 = clock_type::now();
        void* p = memarea::ipc::open(timed, 0);
        const auto t1 = clock_type::now();
        memarea::ipc::close(p);
        t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      stop = true;
      if (warmer.joinable()) warmer.join();
      std::sort(t.begin(), t.end());
      std::printf("%-32s re-open 70 ms apart: min %.2f median %.2f max %.2f us\n",
                  warm ? "another thread warms it" : "alone", t.front(), t[t.size() / 2],
                  t.back());
    }
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
