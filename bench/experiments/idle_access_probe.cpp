// What touching memory costs right after a thread slept 70 ms, on the machine it runs on: the
// floor under issue 14's "cached re-import <= 1 us at any spacing". Each row: the thread sleeps
// 70 ms (or not, "back to back"), then one timed step; 15 samples, min-median-max in us.
//   nothing            two clock reads and nothing between them
//   1 line             one byte of a heap page written long ago
//   16 pages           one byte in each of 16 pages of that heap region
//   user hash map      a find in an unordered_map<string, void*> of 101 entries, 64-byte key
//                      (the user-side cache of memarea-bench's IPC rows)
// Build: g++ -O2 -std=c++20 -o idle_access_probe bench/experiments/idle_access_probe.cpp
// (scripts/gpu-build.sh builds it for the GPU suite).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

void row(const char* name, bool idle, const std::function<void()>& step) {
  std::vector<double> t;
  for (int r = 0; r < 15; ++r) {
    if (idle) std::this_thread::sleep_for(std::chrono::milliseconds(70));
    const auto t0 = clock_type::now();
    step();
    t.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  std::printf("%-16s %-13s min %6.2f  median %6.2f  max %6.2f us\n", name,
              idle ? "70 ms apart" : "back to back", t.front(), t[t.size() / 2], t.back());
}

}  // namespace

int main() {
  constexpr std::size_t kPage = 4096, kPages = 1024;
  std::vector<unsigned char> heap(kPages * kPage);
  for (std::size_t i = 0; i < heap.size(); i += 64) heap[i] = static_cast<unsigned char>(i);
  std::unordered_map<std::string, void*> cache;
  const std::string key(64, 'k');
  cache[key] = heap.data();
  for (int f = 0; f < 100; ++f) cache[std::to_string(f)] = nullptr;
  volatile unsigned sink = 0;
  unsigned round = 0;
  for (bool idle : {false, true}) {
    row("nothing", idle, [] {});
    row("1 line", idle, [&] { sink = sink + heap[(++round * 7919 % kPages) * kPage]; });
    row("16 pages", idle, [&] {
      ++round;
      unsigned s = 0;
      for (std::size_t j = 0; j < 16; ++j) s += heap[((round * 131 + j * 61) % kPages) * kPage];
      sink = sink + s;
    });
    row("user hash map", idle, [&] {
      void* p = cache.find(key)->second;
      sink = sink + (p != nullptr);
    });
  }
  return 0;
}
