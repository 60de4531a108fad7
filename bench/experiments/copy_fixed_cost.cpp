// Experiment (not part of the library; issue 18, deliverable 6): memarea's fixed cost per
// copy_async / copy_peer_async of 4 KiB, from entry to the driver call, on any backend:
// time(memarea call) - time(the driver front's call on the same stream and pointers). Batches
// of B enqueues are timed in this thread's CPU time (others' load on a shared machine counts
// less), the stream synchronised untimed between batches, memarea and driver batches
// interleaved. Prints min/median/max over the repetitions of ns per call for each, and of the
// per-repetition difference. Build against a build tree's shared library:
//   g++ -std=c++20 -O2 -DFMT_HEADER_ONLY=1 -Iinclude -Isrc bench/experiments/copy_fixed_cost.cpp
//       -Lbuild/default/src -Wl,-rpath,$PWD/build/default/src -lmemarea -lpthread -o /tmp/cfc
//   MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2 /tmp/cfc [reps=31] [batch=2000]
// Instructions instead of time (deterministic; issue 18's before/after sim figures):
//   valgrind --tool=callgrind --toggle-collect='memarea::copy_async(*'
//     --toggle-collect='memarea::copy_peer_async(*' /tmp/cfc 1 1000 cg CASE   (CASE 0..4)
// then inclusive(copy_async) - inclusive(the backend's memcpy call under it), over 1001 calls.
// CASE 5 (the C API's peer copy), 6 (stream::synchronize) and 7 (memarea_stream_synchronize)
// take one toggle each, --toggle-collect='memarea_memcpy_peer_async',
// 'memarea::stream::synchronize*' and 'memarea_stream_synchronize' (a second toggle inside the
// first would switch collection off), and 6 and 7 subtract the backend's stream_synchronize.
// The CUDA backend's own share, without a GPU: run the same under LD_LIBRARY_PATH of the stand-in
// libcuda (bench/experiments/fake_libcuda.cpp, which says how) with MEMAREA_BACKEND=cuda, and
// subtract the stand-in's cuMemcpyAsync instead (callgrind's call counts include calls made
// outside the toggled function: count driver calls per copy from a run without the raw loop).
// Linked statically instead (as the memarea CLI, whose bench row this is, links memarea):
//   ... bench/experiments/copy_fixed_cost.cpp build/default/src/libmemarea.a -lnuma -ldl
//       -lpthread -lrt -o /tmp/cfc_static
// Instructions per copy_async call, device 0 current, CASE 0 (d0->d0) / CASE 3 (d0->h),
// before -> after the 2026-11-25 changes (issue 18; callgrind 3.19, GCC 12, RelWithDebInfo):
//   sim,  shared library  282 -> 180 / 273 -> 166     static  270 -> 171 / 261 -> 157
//   CUDA stand-in, shared 550 -> 253 / 541 -> 239     static  490 -> 244 / 481 -> 230
// The CUDA figures include the stand-in's cuCtxGetCurrent (21 instructions; one call per copy,
// before and after), in whose place libcuda's own runs.
// Before -> after the 2026-11-27 changes (copy_peer_async's fast path, the front's peer copy and
// stream synchronize inline, peer_enabled inline, the C entries through c_call_hot), sim, shared
// library, same build and callgrind:
//   CASE 4 copy_peer_async d0->d1 371 -> 245   CASE 5 memarea_memcpy_peer_async 384 -> 250
//   CASE 1 copy_async d0->d1      330 -> 253   CASE 0 / 2 / 3  180 / 178 / 166 -> 177 / 169 / 166
//   CASE 6 stream::synchronize     52 ->  44   CASE 7 memarea_stream_synchronize  61 ->  45
// Then system::get() inline (its fast path one load of system_instance::made, as allocations()):
//   CASE 0 copy_async d0->d0 177 -> 161   CASE 4 copy_peer_async d0->d1 245 -> 236
// CASE 8 is memarea::copy (the whole blocking copy, d0->h pinned) against the driver layer's
// memcpy_sync, toggled on 'memarea::copy(*'. On the CUDA stand-in (2026-11-27, session 18):
// 695 instructions a call, of which the stand-in's cuMemcpyAsync 449 and cuCtxGetCurrent 21:
// memarea's own about 220, against copy_async's 186 for the same copy (CASE 3).
#include <memarea/memarea.hpp>
#include "core/system.hpp"
#include "core/stream_impl.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using clk = std::chrono::steady_clock;
using namespace memarea;

#include <time.h>
static double now_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);  // this thread's CPU time: not others' load
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static double batch_ns(int B, const std::function<void()>& f, const stream& s) {
  double t0 = now_ns();
  for (int i = 0; i < B; ++i) f();
  double t1 = now_ns();
  s.synchronize();
  return (t1 - t0) / B;
}

static void report(const char* name, std::vector<double> m, std::vector<double> r) {
  std::vector<double> d(m.size());
  for (size_t i = 0; i < m.size(); ++i) d[i] = m[i] - r[i];
  auto mmm = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    char buf[96];
    std::snprintf(buf, sizeof buf, "%7.1f %7.1f %7.1f", v.front(), v[v.size() / 2], v.back());
    return std::string(buf);
  };
  std::printf("%-28s memarea %s | driver %s | diff %s\n", name, mmm(m).c_str(), mmm(r).c_str(),
              mmm(d).c_str());
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 31;
  const int B = argc > 2 ? std::atoi(argv[2]) : 2000;
  const bool callgrind_mode = argc > 3 && std::strcmp(argv[3], "cg") == 0;
  const std::size_t n = 4096;
  auto& gpu = detail::system::get().gpu();
  // Device 0 current, as in a program that chose its device (and as memarea-bench's raw side
  // makes it): on CUDA a copy on device 0 then switches no context.
  set_device(0);
  buffer a0 = area(0).allocate(n), a0b = area(0).allocate(n), a1 = area(1).allocate(n);
  // Pinned host memory made by memarea (area of the host with pinned flag).
  buffer h = area(0, area_flags::host).allocate(n);
  peer::scoped_access on01(0, 1), on10(1, 0);
  stream s0(0);
  auto* sh = s0.get();
  // Which memarea call a case times: copy_async, copy_peer_async, the C API's
  // memarea_memcpy_peer_async, or a synchronize of the idle stream (C++ and C; the driver's
  // side is its stream_synchronize, and the copy fields are unused).
  enum class entry { copy, copy_peer, c_copy_peer, sync, c_sync, whole };
  struct cas {
    const char* name;
    void* dst;
    const void* src;
    bool peer;
    int dd, sd;
    entry e = entry::copy;
  };
  std::vector<cas> cases = {
      {"d0->d0 (same device)", a0b.data(), a0.data(), false, 0, 0},
      {"d0->d1 (peer, access on)", a1.data(), a0.data(), true, 1, 0},
      {"h->d0 (pinned)", a0.data(), h.data(), false, 0, -1},
      {"d0->h (pinned)", h.data(), a0.data(), false, -1, 0},
      {"copy_peer_async d0->d1 (on)", a1.data(), a0.data(), true, 1, 0, entry::copy_peer},
      {"C memcpy_peer_async d0->d1", a1.data(), a0.data(), true, 1, 0, entry::c_copy_peer},
      {"stream synchronize (idle)", nullptr, nullptr, false, 0, 0, entry::sync},
      {"C stream_synchronize (idle)", nullptr, nullptr, false, 0, 0, entry::c_sync},
      {"copy d0->h (pinned), whole", h.data(), a0.data(), false, -1, 0, entry::whole},
  };
  auto call = [&](const cas& c) {
    switch (c.e) {
      case entry::copy: copy_async(c.dst, c.src, n, sh); break;
      case entry::copy_peer: copy_peer_async(c.dst, c.dd, c.src, c.sd, n, sh); break;
      case entry::c_copy_peer:
        (void)memarea_memcpy_peer_async(c.dst, c.dd, c.src, c.sd, n, sh);
        break;
      case entry::sync: s0.synchronize(); break;
      case entry::c_sync: (void)memarea_stream_synchronize(sh); break;
      case entry::whole: copy(c.dst, c.src, n); break;
    }
  };
  auto raw_call = [&](const cas& c) {
    if (c.e == entry::sync || c.e == entry::c_sync)
      (void)gpu.stream_synchronize(sh->device, sh->native);
    else if (c.e == entry::whole) (void)gpu.memcpy_sync(c.dst, c.src, n, 0, nullptr);
    else if (c.peer) (void)gpu.memcpy_peer_async(c.dst, c.dd, c.src, c.sd, n, 0, sh->native);
    else (void)gpu.memcpy_async(c.dst, c.src, n, 0, sh->native);
  };
  if (callgrind_mode) {
    // One warm call of each, then B calls of each for callgrind to count (toggle via name).
    // The waits in between are the driver's, so that a synchronize case counts only its own.
    const int only = argc > 4 ? std::atoi(argv[4]) : -1;
    auto settle = [&] { (void)gpu.stream_synchronize(sh->device, sh->native); };
    for (int ci = 0; ci < (int)cases.size(); ++ci) {
      if (only >= 0 && ci != only) continue;
      auto& c = cases[ci];
      call(c);
      settle();
      for (int i = 0; i < B; ++i) call(c);
      settle();
      for (int i = 0; i < B; ++i) raw_call(c);
      settle();
    }
    return 0;
  }
  for (auto& c : cases) {
    std::vector<double> m, r;
    auto mem = [&] { call(c); };
    auto raw = [&] { raw_call(c); };
    batch_ns(B, mem, s0);
    batch_ns(B, raw, s0);
    for (int i = 0; i < reps; ++i) {
      if (i % 2) { m.push_back(batch_ns(B, mem, s0)); r.push_back(batch_ns(B, raw, s0)); }
      else { r.push_back(batch_ns(B, raw, s0)); m.push_back(batch_ns(B, mem, s0)); }
    }
    report(c.name, m, r);
  }
  return 0;
}
