// Experiment (not part of the library): where does the staged peer copy lose time, and can
// other mechanisms than copy-engine copies chained by events do better? Issue 4 wants a peer
// copy with access off >= 1.3x the driver's staged copy from 64 MiB; memarea's pipeline (copy
// engines, events) reached 1.22x there. Built and run on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/experiments/staging_paths.cu -lcuda -o staging_paths
//   ./staging_paths          (first call's experiments)
//   ./staging_paths part2    (second call's)
//   ./staging_paths part3    (third call's)
//   ./staging_paths part4    (fourth call's)
// Prints one line per configuration: median time of 20 repetitions and GB/s, and checks the
// destination byte for byte after each configuration's first repetition.
#include "staging_paths_common.cuh"

// ---- part 2: the second call -----------------------------------------------------------------

// memarea's pipeline as queued by the library: events with or without timing.
void ce_events_flagged(rig& r, std::vector<cudaEvent_t>& st, std::vector<cudaEvent_t>& dr,
                       char* dst, const char* src, char* ring, size_t n, size_t c, size_t nb,
                       int sdev, cudaStream_t ss, int ddev, cudaStream_t ds) {
  size_t i = 0;
  for (size_t off = 0; off < n; off += c, ++i) {
    const size_t len = std::min(c, n - off), b = i % nb;
    CK(cudaSetDevice(sdev));
    if (i >= nb) CK(cudaStreamWaitEvent(ss, dr[b], 0));
    CK(cudaMemcpyAsync(ring + b * c, src + off, len, cudaMemcpyDeviceToHost, ss));
    CK(cudaEventRecord(st[b], ss));
    CK(cudaSetDevice(ddev));
    CK(cudaStreamWaitEvent(ds, st[b], 0));
    CK(cudaMemcpyAsync(dst + off, ring + b * c, len, cudaMemcpyHostToDevice, ds));
    if (i + nb < (n + c - 1) / c) CK(cudaEventRecord(dr[b], ds));
  }
}

void part2(rig& r) {
  const size_t n64 = 64 * MiB;
  // Second direction: GPU 1 -> GPU 0 with its own buffers, streams, events and ring.
  char *src1 = nullptr, *dst0 = nullptr, *ring3 = nullptr;
  cudaStream_t s0b = nullptr, s1b = nullptr;
  std::vector<cudaEvent_t> st1(64), dr0(64), st_t(64), dr_t(64);
  CK(cudaHostAlloc(&ring3, ring_bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&src1, max_n));
  CK(cudaMemcpy(src1, r.expect.data(), max_n, cudaMemcpyHostToDevice));
  CK(cudaStreamCreateWithFlags(&s1b, cudaStreamNonBlocking));
  for (auto& e : st1) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (auto& e : dr_t) CK(cudaEventCreate(&e));
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&dst0, max_n));
  CK(cudaStreamCreateWithFlags(&s0b, cudaStreamNonBlocking));
  for (auto& e : dr0) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (auto& e : st_t) CK(cudaEventCreate(&e));

  auto sync4 = [&] {
    sync_both(r);
    CK(cudaSetDevice(0));
    CK(cudaStreamSynchronize(s0b));
    CK(cudaSetDevice(1));
    CK(cudaStreamSynchronize(s1b));
  };
  auto time4 = [&](const char* name, size_t n, double bytes_factor,
                   const std::function<void()>& fn, double base_gbs) {
    std::vector<double> t;
    for (int rep = 0; rep < 23; ++rep) {
      auto a = std::chrono::steady_clock::now();
      fn();
      sync4();
      auto b = std::chrono::steady_clock::now();
      if (rep >= 3) t.push_back(std::chrono::duration<double>(b - a).count());
    }
    const double gbs = bytes_factor * n / median(t) / 1e9;
    std::printf("%-52s n=%4zu MiB  %9.1f us  %6.1f GB/s", name, n / MiB, median(t) * 1e6, gbs);
    if (base_gbs > 0) std::printf("  %.3fx driver", gbs / base_gbs);
    std::printf("\n");
    std::fflush(stdout);
    return gbs;
  };

  std::printf("\n# part 2: timing events, bidirectional, finer SM parts\n");
  for (size_t n : {64 * MiB, 256 * MiB}) {
    const double uni = time4("driver one way", n, 1, [&] {
      CK(cudaSetDevice(0));
      CK(cudaMemcpyPeerAsync(r.dst, 1, r.src, 0, n, r.s0));
    }, 0);
    const double bi = time4("driver both ways", n, 2, [&] {
      CK(cudaSetDevice(0));
      CK(cudaMemcpyPeerAsync(r.dst, 1, r.src, 0, n, r.s0));
      CK(cudaSetDevice(1));
      CK(cudaMemcpyPeerAsync(dst0, 0, src1, 1, n, s1b));
    }, 0);
    for (size_t c : {4 * MiB, 8 * MiB}) {
      const size_t nb = ring_bytes / 2 / c;  // the ring's first half: 32 MiB of slots
      char name[96];
      std::snprintf(name, sizeof name, "CE events no timing, %zu MiB x%zu", c / MiB, nb);
      time4(name, n, 1, [&] {
        ce_events_flagged(r, r.staged, r.drained, r.dst, r.src, r.ring, n, c, nb, 0, r.s0, 1, r.s1);
      }, uni);
      std::snprintf(name, sizeof name, "CE events timing, %zu MiB x%zu", c / MiB, nb);
      time4(name, n, 1, [&] {
        ce_events_flagged(r, st_t, dr_t, r.dst, r.src, r.ring, n, c, nb, 0, r.s0, 1, r.s1);
      }, uni);
      std::snprintf(name, sizeof name, "CE both ways queued one after the other, %zu MiB", c / MiB);
      time4(name, n, 2, [&] {
        ce_events_flagged(r, r.staged, r.drained, r.dst, r.src, r.ring, n, c, nb, 0, r.s0, 1, r.s1);
        ce_events_flagged(r, st1, dr0, dst0, src1, ring3, n, c, nb, 1, s1b, 0, s0b);
      }, bi);
    }
    time4("4 engines independent (d2h+h2d on each GPU), 64 MiB ops", n, 2, [&] {
      for (size_t off = 0; off < n; off += ring_bytes) {
        const size_t len = std::min(ring_bytes, n - off);
        CK(cudaSetDevice(0));
        CK(cudaMemcpyAsync(r.ring, r.src + off, len, cudaMemcpyDeviceToHost, r.s0));
        CK(cudaMemcpyAsync(dst0 + off, r.ring2, len, cudaMemcpyHostToDevice, s0b));
        CK(cudaSetDevice(1));
        CK(cudaMemcpyAsync(ring3, src1 + off, len, cudaMemcpyDeviceToHost, s1b));
        CK(cudaMemcpyAsync(r.dst + off, r.ring2, len, cudaMemcpyHostToDevice, r.s1));
      }
    }, 0);
  }
  std::printf("\n# SM+SM, finer slots (64 MiB)\n");
  for (size_t slot : {32 * KiB, 64 * KiB, 128 * KiB}) {
    for (int b : {8, 16, 32}) {
      char name[64];
      std::snprintf(name, sizeof name, "SM+SM, slot %zu KiB, %d+%d blocks", slot / KiB, b, b);
      measure(r, name, n64, true, [&] { sm_both(r, n64, slot, b, b); }, 37.9);
    }
  }
}

// ---- part 3: the third call: several streams per side ----------------------------------------

// The pipeline with `lanes` stream pairs; chunk i goes through lane i % lanes, slot i % nb.
void ce_lanes(rig& r, std::vector<cudaStream_t>& s0, std::vector<cudaStream_t>& s1, size_t n,
              size_t c, size_t nb) {
  const size_t lanes = s0.size();
  size_t i = 0;
  const size_t chunks = (n + c - 1) / c;
  for (size_t off = 0; off < n; off += c, ++i) {
    const size_t len = std::min(c, n - off), b = i % nb, l = i % lanes;
    CK(cudaSetDevice(0));
    if (i >= nb) CK(cudaStreamWaitEvent(s0[l], r.drained[b], 0));
    CK(cudaMemcpyAsync(r.ring + b * c, r.src + off, len, cudaMemcpyDeviceToHost, s0[l]));
    CK(cudaEventRecord(r.staged[b], s0[l]));
    CK(cudaSetDevice(1));
    CK(cudaStreamWaitEvent(s1[l], r.staged[b], 0));
    CK(cudaMemcpyAsync(r.dst + off, r.ring + b * c, len, cudaMemcpyHostToDevice, s1[l]));
    if (i + nb < chunks) CK(cudaEventRecord(r.drained[b], s1[l]));
  }
}

void part3(rig& r) {
  const size_t n64 = 64 * MiB;
  std::vector<cudaStream_t> s0(4), s1(4);
  CK(cudaSetDevice(0));
  for (auto& s : s0) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaSetDevice(1));
  for (auto& s : s1) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Untimed events for the lanes (part 1 made r.staged/r.drained untimed already).
  auto sync_all = [&] {
    CK(cudaSetDevice(0));
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(1));
    CK(cudaDeviceSynchronize());
  };
  auto timeit = [&](const char* name, size_t n, const std::function<void()>& fn, double base,
                    bool check) {
    if (check) {
      CK(cudaSetDevice(1));
      CK(cudaMemset(r.dst, 0, n));
      CK(cudaDeviceSynchronize());
    }
    std::vector<double> t;
    bool bad = false;
    for (int rep = 0; rep < 23; ++rep) {
      auto a = std::chrono::steady_clock::now();
      fn();
      sync_all();
      auto b = std::chrono::steady_clock::now();
      if (rep >= 3) t.push_back(std::chrono::duration<double>(b - a).count());
      if (rep == 0 && check) {
        CK(cudaSetDevice(1));
        CK(cudaMemcpy(r.got.data(), r.dst, n, cudaMemcpyDeviceToHost));
        bad = std::memcmp(r.got.data(), r.expect.data(), n) != 0;
      }
    }
    const double gbs = n / median(t) / 1e9;
    std::printf("%-52s n=%4zu MiB  %9.1f us  %6.1f GB/s", name, n / MiB, median(t) * 1e6, gbs);
    if (base > 0) std::printf("  %.3fx driver", gbs / base);
    if (check) std::printf("  %s", bad ? "DATA MISMATCH" : "data ok");
    std::printf("\n");
    std::fflush(stdout);
    return gbs;
  };
  std::printf("\n# part 3: does a second stream per side hide the per-copy cost?\n");
  double base64 = timeit("driver one way", n64, [&] {
    CK(cudaSetDevice(0));
    CK(cudaMemcpyPeerAsync(r.dst, 1, r.src, 0, n64, r.s0));
  }, 0, true);
  for (size_t c : {512 * KiB, 1 * MiB, 2 * MiB}) {
    for (size_t lanes : {1, 2, 4}) {
      char name[96];
      std::snprintf(name, sizeof name, "d2h only GPU0, %zu KiB copies over %zu streams", c / KiB, lanes);
      timeit(name, n64, [&] {
        CK(cudaSetDevice(0));
        size_t i = 0;
        for (size_t off = 0; off < n64; off += c, ++i)
          CK(cudaMemcpyAsync(r.ring + off, r.src + off, c, cudaMemcpyDeviceToHost, s0[i % lanes]));
      }, 0, false);
      std::snprintf(name, sizeof name, "h2d only GPU1, %zu KiB copies over %zu streams", c / KiB, lanes);
      timeit(name, n64, [&] {
        CK(cudaSetDevice(1));
        size_t i = 0;
        for (size_t off = 0; off < n64; off += c, ++i)
          CK(cudaMemcpyAsync(r.dst + off, r.ring + off, c, cudaMemcpyHostToDevice, s1[i % lanes]));
      }, 0, false);
    }
  }
  for (size_t c : {1 * MiB, 2 * MiB, 4 * MiB}) {
    for (size_t lanes : {1, 2, 4}) {
      const size_t nb = std::min<size_t>(32 * MiB / c, 64);
      std::vector<cudaStream_t> a(s0.begin(), s0.begin() + lanes), b(s1.begin(), s1.begin() + lanes);
      char name[96];
      std::snprintf(name, sizeof name, "pipeline %zu MiB x%zu, %zu lanes", c / MiB, nb, lanes);
      timeit(name, n64, [&] { ce_lanes(r, a, b, n64, c, nb); }, base64, true);
    }
  }
  double base256 = timeit("driver one way", 256 * MiB, [&] {
    CK(cudaSetDevice(0));
    CK(cudaMemcpyPeerAsync(r.dst, 1, r.src, 0, 256 * MiB, r.s0));
  }, 0, true);
  for (size_t c : {1 * MiB, 2 * MiB, 4 * MiB}) {
    for (size_t lanes : {1, 2}) {
      const size_t nb = std::min<size_t>(32 * MiB / c, 64);
      std::vector<cudaStream_t> a(s0.begin(), s0.begin() + lanes), b(s1.begin(), s1.begin() + lanes);
      char name[96];
      std::snprintf(name, sizeof name, "pipeline %zu MiB x%zu, %zu lanes", c / MiB, nb, lanes);
      timeit(name, 256 * MiB, [&] { ce_lanes(r, a, b, 256 * MiB, c, nb); }, base256, true);
    }
  }
}

// ---- part 4: the fourth call: what kind of host memory the slots are ----------------------------

void part4(rig& r) {
  struct ring_kind {
    const char* name;
    char* p;
  };
  std::vector<ring_kind> kinds;
  kinds.push_back({"cudaHostAlloc portable|mapped", r.ring});
  char* wc = nullptr;
  CK(cudaHostAlloc(&wc, ring_bytes,
                   cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined));
  kinds.push_back({"cudaHostAlloc + write-combined", wc});
  void* thp = nullptr;
  if (posix_memalign(&thp, 2 * MiB, ring_bytes) == 0) {
    madvise(thp, ring_bytes, MADV_HUGEPAGE);
    std::memset(thp, 3, ring_bytes);
    CK(cudaHostRegister(thp, ring_bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
    kinds.push_back({"THP (madvise) + cudaHostRegister", static_cast<char*>(thp)});
  }
  void* huge = mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  if (huge != MAP_FAILED) {
    std::memset(huge, 4, ring_bytes);
    CK(cudaHostRegister(huge, ring_bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
    kinds.push_back({"MAP_HUGETLB + cudaHostRegister", static_cast<char*>(huge)});
  } else {
    std::printf("MAP_HUGETLB: %s (no hugetlb pages reserved)\n", std::strerror(errno));
  }
  {
    FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[256] = {0};
    if (f && std::fgets(line, sizeof line, f)) std::printf("THP: %s", line);
    if (f) std::fclose(f);
  }
  auto timeit = [&](const char* what, const char* kind, size_t n, const std::function<void()>& fn,
                    double base) {
    std::vector<double> t;
    for (int rep = 0; rep < 23; ++rep) {
      auto a = std::chrono::steady_clock::now();
      fn();
      sync_both(r);
      auto b = std::chrono::steady_clock::now();
      if (rep >= 3) t.push_back(std::chrono::duration<double>(b - a).count());
    }
    const double gbs = n / median(t) / 1e9;
    std::printf("%-26s %-34s n=%4zu MiB %8.1f us %6.1f GB/s", what, kind, n / MiB,
                median(t) * 1e6, gbs);
    if (base > 0) std::printf("  %.3fx driver", gbs / base);
    std::printf("\n");
    std::fflush(stdout);
    return gbs;
  };
  std::printf("\n# part 4: slots in other kinds of pinned memory\n");
  for (int round = 0; round < 2; ++round) {
    for (size_t n : {64 * MiB, 256 * MiB}) {
      const double base = timeit("driver peer copy", "-", n, [&] {
        CK(cudaSetDevice(0));
        CK(cudaMemcpyPeerAsync(r.dst, 1, r.src, 0, n, r.s0));
      }, 0);
      for (auto& k : kinds) {
        if (n == 64 * MiB) {
          timeit("d2h one 64 MiB copy", k.name, n, [&] {
            CK(cudaSetDevice(0));
            CK(cudaMemcpyAsync(k.p, r.src, n, cudaMemcpyDeviceToHost, r.s0));
          }, 0);
          timeit("h2d one 64 MiB copy", k.name, n, [&] {
            CK(cudaSetDevice(1));
            CK(cudaMemcpyAsync(r.dst, k.p, n, cudaMemcpyHostToDevice, r.s1));
          }, 0);
        }
        for (size_t c : {2 * MiB, 4 * MiB}) {
          char what[64];
          std::snprintf(what, sizeof what, "pipeline %zu MiB x%zu", c / MiB, 32 * MiB / c);
          CK(cudaSetDevice(1));
          CK(cudaMemset(r.dst, 0, n));
          CK(cudaDeviceSynchronize());
          timeit(what, k.name, n, [&] {
            ce_events_flagged(r, r.staged, r.drained, r.dst, r.src, k.p, n, c, 32 * MiB / c, 0,
                              r.s0, 1, r.s1);
          }, base);
          CK(cudaSetDevice(1));
          CK(cudaMemcpy(r.got.data(), r.dst, n, cudaMemcpyDeviceToHost));
          if (std::memcmp(r.got.data(), r.expect.data(), n) != 0) std::printf("  DATA MISMATCH\n");
        }
      }
    }
  }
}

int main(int argc, char** argv) {
  rig r;
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  if (count < 2) {
    std::printf("needs two GPUs\n");
    return 1;
  }
  int can = 0;
  CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  std::printf("can access peer 0->1: %d (access stays off throughout)\n", can);
  CK(cudaDeviceGetAttribute(&r.sms, cudaDevAttrMultiProcessorCount, 0));
  CUdevice dev0;
  CU(cuDeviceGet(&dev0, 0));
  int memops = 0;
  CU(cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev0));
  std::printf("SMs %d; stream wait value NOR %d\n", r.sms, memops);

  r.expect.resize(max_n);
  r.got.resize(max_n);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < max_n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(r.expect.data() + i, &v, 8);
  }
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&r.src, max_n));
  CK(cudaMemcpy(r.src, r.expect.data(), max_n, cudaMemcpyHostToDevice));
  CK(cudaStreamCreateWithFlags(&r.s0, cudaStreamNonBlocking));
  CK(cudaHostAlloc(&r.ring, ring_bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  CK(cudaHostAlloc(&r.ring2, ring_bytes, cudaHostAllocPortable | cudaHostAllocMapped));
  CK(cudaHostAlloc(&r.flags, 2 * max_flags * sizeof(unsigned),
                   cudaHostAllocPortable | cudaHostAllocMapped));
  CK(cudaHostAlloc(&r.err, 64, cudaHostAllocPortable | cudaHostAllocMapped));
  std::memset(r.ring, 1, ring_bytes);
  std::memset(r.ring2, 2, ring_bytes);
  r.staged.resize(64);
  for (auto& e : r.staged) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CK(cudaSetDevice(1));
  CK(cudaMalloc(&r.dst, max_n));
  CK(cudaStreamCreateWithFlags(&r.s1, cudaStreamNonBlocking));
  r.drained.resize(64);
  for (auto& e : r.drained) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

  if (argc > 1 && std::string(argv[1]) == "part4") {
    part4(r);
    std::printf("\ndone\n");
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "part3") {
    part3(r);
    std::printf("\ndone\n");
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "part2") {
    part2(r);
    std::printf("\ndone\n");
    return 0;
  }
  const size_t sizes[] = {16 * MiB, 64 * MiB, 256 * MiB};
  double driver[3] = {0, 0, 0};
  auto base = [&](size_t n) { return n == 16 * MiB ? driver[0] : n == 64 * MiB ? driver[1] : driver[2]; };

  std::printf("\n# driver's staged peer copy (access off)\n");
  for (int k = 0; k < 3; ++k) {
    const size_t n = sizes[k];
    std::vector<double> t;
    for (int rep = 0; rep < 23; ++rep) {
      auto a = std::chrono::steady_clock::now();
      CK(cudaSetDevice(0));
      CK(cudaMemcpyPeerAsync(r.dst, 1, r.src, 0, n, r.s0));
      CK(cudaStreamSynchronize(r.s0));
      auto b = std::chrono::steady_clock::now();
      if (rep >= 3) t.push_back(std::chrono::duration<double>(b - a).count());
    }
    driver[k] = n / median(t) / 1e9;
    std::printf("%-44s n=%4zu MiB  %9.1f us  %6.1f GB/s\n", "driver cudaMemcpyPeerAsync", n / MiB,
                median(t) * 1e6, driver[k]);
  }

  const size_t n64 = 64 * MiB;
  std::printf("\n# one engine alone: per-copy cost (64 MiB in chunks)\n");
  for (size_t c : {256 * KiB, 1 * MiB, 4 * MiB, 64 * MiB}) {
    char name[64];
    std::snprintf(name, sizeof name, "d2h only, GPU0, %zu KiB copies", c / KiB);
    measure(r, name, n64, false, [&] {
      CK(cudaSetDevice(0));
      for (size_t off = 0; off < n64; off += c)
        CK(cudaMemcpyAsync(r.ring + off, r.src + off, c, cudaMemcpyDeviceToHost, r.s0));
    });
    std::snprintf(name, sizeof name, "h2d only, GPU1, %zu KiB copies", c / KiB);
    measure(r, name, n64, false, [&] {
      CK(cudaSetDevice(1));
      for (size_t off = 0; off < n64; off += c)
        CK(cudaMemcpyAsync(r.dst + off, r.ring + off, c, cudaMemcpyHostToDevice, r.s1));
    });
    std::snprintf(name, sizeof name, "d2h GPU0 + h2d GPU1 independent, %zu KiB", c / KiB);
    measure(r, name, n64, false, [&] {
      for (size_t off = 0; off < n64; off += c) {
        CK(cudaSetDevice(0));
        CK(cudaMemcpyAsync(r.ring + off, r.src + off, c, cudaMemcpyDeviceToHost, r.s0));
        CK(cudaSetDevice(1));
        CK(cudaMemcpyAsync(r.dst + off, r.ring2 + off, c, cudaMemcpyHostToDevice, r.s1));
      }
    });
  }
  std::printf("\n# host time to queue the current pipeline (64 MiB, 1 MiB chunks)\n");
  {
    std::vector<double> t;
    for (int rep = 0; rep < 10; ++rep) {
      auto a = std::chrono::steady_clock::now();
      ce_events(r, n64, 1 * MiB, 4);
      auto b = std::chrono::steady_clock::now();
      sync_both(r);
      t.push_back(std::chrono::duration<double>(b - a).count());
    }
    std::printf("queue 64 chunks: %.1f us (%.2f us per chunk)\n", median(t) * 1e6,
                median(t) * 1e6 / 64);
  }

  std::printf("\n# copy engines chained by events (memarea today) and by stream memory ops\n");
  for (size_t c : {1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB}) {
    char name[64];
    std::snprintf(name, sizeof name, "CE events, %zu MiB x4", c / MiB);
    measure(r, name, n64, true, [&] { ce_events(r, n64, c, 4); }, base(n64));
    std::snprintf(name, sizeof name, "CE events, %zu MiB x%zu (no reuse)", c / MiB, n64 / c);
    if (n64 / c <= 64) measure(r, name, n64, true, [&] { ce_events(r, n64, c, n64 / c); }, base(n64));
    std::snprintf(name, sizeof name, "CE memops, %zu MiB x4", c / MiB);
    measure(r, name, n64, true, [&] { ce_memops(r, n64, c, 4, false); }, base(n64));
    std::snprintf(name, sizeof name, "CE memops, %zu MiB x%zu (no reuse)", c / MiB,
                  std::min<size_t>(n64 / c, 64));
    measure(r, name, n64, true, [&] { ce_memops(r, n64, c, std::min<size_t>(n64 / c, 64), false); },
            base(n64));
  }

  std::printf("\n# SMs alone: writes to / reads from pinned host memory (64 MiB)\n");
  for (int b : {2, 4, 8, 16, 32, 66, 132}) {
    if (b > r.sms) continue;
    char name[64];
    std::snprintf(name, sizeof name, "SM write dev->host GPU0, %d blocks", b);
    measure(r, name, n64, false, [&] {
      CK(cudaSetDevice(0));
      sm_copy<<<b, 1024, 0, r.s0>>>(r.ring, r.src, n64);
      CK(cudaGetLastError());
    });
    std::snprintf(name, sizeof name, "SM read host->dev GPU1, %d blocks", b);
    measure(r, name, n64, false, [&] {
      CK(cudaSetDevice(1));
      sm_copy<<<b, 1024, 0, r.s1>>>(r.dst, r.ring, n64);
      CK(cudaGetLastError());
    });
  }

  std::printf("\n# both halves by the SMs, flags per slot\n");
  for (size_t slot : {256 * KiB, 1 * MiB}) {
    for (int b : {4, 8, 16, 32, 66}) {
      char name[64];
      std::snprintf(name, sizeof name, "SM+SM, slot %zu KiB, %d+%d blocks", slot / KiB, b, b);
      measure(r, name, n64, true, [&] { sm_both(r, n64, slot, b, b); }, base(n64));
    }
  }

  std::printf("\n# copy engine on one side, SMs on the other\n");
  for (size_t c : {1 * MiB, 2 * MiB, 4 * MiB}) {
    for (int b : {8, 16, 32}) {
      char name[64];
      std::snprintf(name, sizeof name, "CE d2h + SM h2d, %zu MiB, %d blocks", c / MiB, b);
      measure(r, name, n64, true, [&] { ce_then_sm(r, n64, c, b); }, base(n64));
      std::snprintf(name, sizeof name, "SM d2h + CE h2d, %zu MiB, %d blocks", c / MiB, b);
      measure(r, name, n64, true, [&] { sm_then_ce(r, n64, c, b); }, base(n64));
    }
  }

  std::printf("\n# the same at 16 and 256 MiB (a few settings)\n");
  for (size_t n : {16 * MiB, 256 * MiB}) {
    measure(r, "CE events, chunk sqrt rule x4", n, true,
            [&] { ce_events(r, n, n == 16 * MiB ? 2 * MiB : 8 * MiB, 4); }, base(n));
    measure(r, "CE memops, 2 MiB x32", n, true, [&] { ce_memops(r, n, 2 * MiB, 32, false); },
            base(n));
    for (int b : {8, 16, 32}) {
      char name[64];
      std::snprintf(name, sizeof name, "SM+SM, slot 1024 KiB, %d+%d blocks", b, b);
      measure(r, name, n, true, [&] { sm_both(r, n, 1 * MiB, b, b); }, base(n));
      std::snprintf(name, sizeof name, "CE d2h + SM h2d, 2 MiB, %d blocks", b);
      measure(r, name, n, true, [&] { ce_then_sm(r, n, 2 * MiB, b); }, base(n));
    }
  }
  std::printf("\ndone\n");
  return 0;
}
