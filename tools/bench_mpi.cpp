// memarea-bench-mpi: the MPI window's bench (issue 16), a program of its own so that the
// `memarea` CLI never depends on MPI. Run it under mpirun:
//   mpirun -np 2 memarea-bench-mpi [--quick] [--reps N] [--json FILE]
// Rows, side by side in one run, with min-median-max of every figure:
//  * halo exchange of 4 KiB to 256 MiB per side between the ranks of a node (each rank sends
//    its first `side` bytes to its left neighbour and its last `side` bytes to its right one,
//    periodic), through the window (copies into the neighbours' segments, then a fence), against
//    MPI_Sendrecv of the same device buffers: CUDA-aware where the MPI is (MPIX_Query_cuda_support,
//    looked up at run time), and always staged through pinned host buffers by hand. And the
//    device's own copy bandwidth: every rank copies the same bytes within its own device at
//    once, fenced alike. Each step's time is the slowest rank's; the received bytes of every
//    path are checked against the senders' random data (untimed).
//  * window set-up (construction) and destruction time against the number of ranks.
#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/mpi.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>
#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace mm = memarea::mpi;
using clock_type = std::chrono::steady_clock;

int g_rank = 0;

struct spread {
  double min = 0, median = 0, max = 0;
};

spread spread_of(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2], t.back()};
}

std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 20)) return fmt::format("{} MiB", n >> 20);
  return fmt::format("{} KiB", n >> 10);
}

std::string ratio_text(double ours, double theirs) {
  if (ours <= 0 || theirs <= 0) return "-";
  double r = theirs / ours;  // times: > 1 means ours is faster
  return r >= 1 ? fmt::format("{:.2f}x faster", r) : fmt::format("{:.2f}x slower", 1 / r);
}

/// Whether the MPI library moves device memory itself (Open MPI's extension, looked up at run
/// time: the library the program runs with may differ from the one it was built against).
bool mpi_cuda_aware() {
  if (memarea::backend_name() != "cuda") return false;
  using query_fn = int (*)();
  auto q = reinterpret_cast<query_fn>(dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support"));
  return q && q() == 1;
}

std::vector<unsigned char> pattern(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 gen(seed * 0x9e3779b97f4a7c15ull + 7);
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t x = gen();
    std::memcpy(v.data() + i, &x, std::min<std::size_t>(8, n - i));
  }
  return v;
}

/// One timed operation per call, the slowest rank's time per repetition (microseconds).
std::vector<double> time_steps(int reps, MPI_Comm comm, const std::function<void()>& step) {
  std::vector<double> t(static_cast<std::size_t>(reps));
  for (auto& x : t) {
    MPI_Barrier(comm);
    auto a = clock_type::now();
    step();
    x = std::chrono::duration<double, std::micro>(clock_type::now() - a).count();
  }
  MPI_Allreduce(MPI_IN_PLACE, t.data(), reps, MPI_DOUBLE, MPI_MAX, comm);
  return t;
}

struct result_row {
  std::string group, variant, unit;
  spread s;
  std::string note;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  bool quick = false;
  int reps = 30;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(3, std::atoi(argv[++i]));
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--help" || a == "-h") {
      if (g_rank == 0) std::printf("usage: mpirun -np N memarea-bench-mpi [--quick] [--reps N] [--json FILE]\n");
      MPI_Finalize();
      return 0;
    } else {
      if (g_rank == 0) std::fprintf(stderr, "memarea-bench-mpi: unknown argument '%s'\n", a.c_str());
      MPI_Finalize();
      return 2;
    }
  }
  if (quick) reps = std::min(reps, 5);
  std::vector<result_row> rows;
  int failures = 0;
  std::vector<std::string> verdicts;
  try {
    const bool aware = mpi_cuda_aware();
    const std::vector<std::size_t> sides =
        quick ? std::vector<std::size_t>{4 << 10, 64 << 10, 1 << 20}
              : std::vector<std::size_t>{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
    const std::size_t biggest = sides.back();
    mm::shared_window win(MPI_COMM_WORLD, 2 * biggest);  // [left halo | right halo]
    const int me = win.node_rank(), n = win.node_size();
    const int left = (me + n - 1) % n, right = (me + 1) % n;
    const int left_rank = win.rank_of(left), right_rank = win.rank_of(right);
    memarea::area dev(win.device());
    memarea::buffer send = dev.allocate(2 * biggest);   // [first side bytes | last side bytes]
    memarea::buffer recv = dev.allocate(2 * biggest);   // the Sendrecv paths' halos
    memarea::buffer hsend = memarea::area(win.device(), memarea::area_flags::host).allocate(2 * biggest);
    memarea::buffer hrecv = memarea::area(win.device(), memarea::area_flags::host).allocate(2 * biggest);
    memarea::stream s(win.device());
    auto* halo = static_cast<char*>(win.local());
    auto* sb = static_cast<char*>(send.data());
    auto* rb = static_cast<char*>(recv.data());
    auto* hs = static_cast<char*>(hsend.data());
    auto* hr = static_cast<char*>(hrecv.data());
    if (g_rank == 0) {
      std::printf("memarea-bench-mpi: %d ranks, node of %d, backend %s, device %d; MPI_Sendrecv "
                  "paths: staged through pinned host memory%s; %d repetitions\n",
                  world, n, memarea::backend_name().c_str(), win.device(),
                  aware ? ", CUDA-aware" : " (the MPI is not CUDA-aware)", reps);
    }
    for (std::size_t side : sides) {
      const int count = static_cast<int>(side);
      // Random data per rank and size, so that a check finds any byte in the wrong place.
      auto data = pattern(std::uint64_t(g_rank) * 977 + side, 2 * side);
      memarea::copy(sb, data.data(), 2 * side);
      auto via_window = [&] {  // into the left neighbour's right halo, the right one's left halo
        memarea::copy_async(static_cast<char*>(win.remote(left)) + side, sb, side, s);
        memarea::copy_async(win.remote(right), sb + side, side, s);
        win.fence(s.get());
      };
      auto via_mpi = [&](char* sendbuf, char* recvbuf) {
        MPI_Sendrecv(sendbuf, count, MPI_BYTE, left_rank, 1, recvbuf + side, count, MPI_BYTE,
                     right_rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(sendbuf + side, count, MPI_BYTE, right_rank, 2, recvbuf, count, MPI_BYTE,
                     left_rank, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      };
      auto via_staged = [&] {
        memarea::copy(hs, sb, 2 * side);
        via_mpi(hs, hr);
        memarea::copy(rb, hr, 2 * side);
      };
      auto via_aware = [&] { via_mpi(sb, rb); };
      auto device_copy = [&] {  // the same bytes, within this rank's own device
        memarea::copy_async(rb + side, sb, side, s);
        memarea::copy_async(rb, sb + side, side, s);
        win.fence(s.get());
      };
      // Checks (untimed): the halos hold the neighbours' data, byte for byte.
      auto expect_left = pattern(std::uint64_t(left_rank) * 977 + side, 2 * side);
      auto expect_right = pattern(std::uint64_t(right_rank) * 977 + side, 2 * side);
      auto check = [&](const char* what, const char* halos) {
        std::vector<unsigned char> got(2 * side);
        memarea::copy(got.data(), halos, 2 * side);
        bool ok = std::memcmp(got.data(), expect_left.data() + side, side) == 0 &&
                  std::memcmp(got.data() + side, expect_right.data(), side) == 0;
        int all_ok = ok;
        MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ok) {
          ++failures;
          if (g_rank == 0) std::fprintf(stderr, "%s %s: received bytes differ\n", what, size_name(side).c_str());
        }
      };
      memarea::copy(halo, std::vector<unsigned char>(2 * side).data(), 2 * side);
      MPI_Barrier(MPI_COMM_WORLD);
      via_window();
      check("window", halo);
      memarea::copy(rb, std::vector<unsigned char>(2 * side).data(), 2 * side);
      via_staged();
      check("staged MPI_Sendrecv", rb);
      if (aware) {
        memarea::copy(rb, std::vector<unsigned char>(2 * side).data(), 2 * side);
        via_aware();
        check("CUDA-aware MPI_Sendrecv", rb);
      }
      // Timed, in turns so that drift slows every path alike.
      const int r = side >= (16u << 20) ? std::max(3, reps / 3) : reps;
      std::vector<double> tw, ts, ta, td;
      for (int i = 0; i < r; ++i) {
        auto one = [&](std::vector<double>& into, const std::function<void()>& f) {
          into.push_back(time_steps(1, MPI_COMM_WORLD, f)[0]);
        };
        one(tw, via_window);
        one(ts, via_staged);
        if (aware) one(ta, via_aware);
        one(td, device_copy);
      }
      const std::string g = "halo " + size_name(side) + " per side";
      auto w = spread_of(tw), st = spread_of(ts), d = spread_of(td);
      spread a{};
      if (aware) a = spread_of(ta);
      double best_mpi = aware ? std::min(a.median, st.median) : st.median;
      rows.push_back({g, "window (copies + fence)", "us", w, ratio_text(w.median, best_mpi) + " than the faster MPI_Sendrecv"});
      rows.push_back({g, "MPI_Sendrecv staged by hand", "us", st, ""});
      if (aware) rows.push_back({g, "MPI_Sendrecv CUDA-aware", "us", a, ""});
      rows.push_back({g, "device copy (same bytes, own device)", "us", d,
                      fmt::format("window {:.1f} GB/s, device {:.1f} GB/s per rank",
                                  2.0 * side / w.median / 1e3, 2.0 * side / d.median / 1e3)});
      if (side == (64u << 10)) {
        double x = best_mpi / w.median;
        verdicts.push_back(fmt::format("64 KiB: window {:.2f}x the faster MPI_Sendrecv (target >= 2x): {}",
                                       x, x >= 2 ? "met" : "missed"));
      }
      if (side == (256u << 20)) {
        double x = d.median / w.median;
        verdicts.push_back(fmt::format("256 MiB: window {:.2f}x the device's copy bandwidth (target >= 0.9x): {}",
                                       x, x >= 0.9 ? "met" : "missed"));
      }
    }
    win.destroy();

    // Window set-up against the number of ranks: 1, 2, 4, ... and all.
    std::vector<int> counts;
    for (int k = 1; k < world; k *= 2) counts.push_back(k);
    counts.push_back(world);
    for (int k : counts) {
      MPI_Comm sub;
      MPI_Comm_split(MPI_COMM_WORLD, g_rank < k ? 0 : MPI_UNDEFINED, g_rank, &sub);
      if (sub != MPI_COMM_NULL) {
        std::vector<double> make, destroy;
        const int r = quick ? 5 : std::max(reps, 20);
        for (int i = 0; i < r; ++i) {
          MPI_Barrier(sub);
          auto a = clock_type::now();
          mm::shared_window w(sub, 1 << 20);
          auto b = clock_type::now();
          MPI_Barrier(sub);
          auto c = clock_type::now();
          w.destroy();
          auto e = clock_type::now();
          make.push_back(std::chrono::duration<double, std::micro>(b - a).count());
          destroy.push_back(std::chrono::duration<double, std::micro>(e - c).count());
        }
        MPI_Allreduce(MPI_IN_PLACE, make.data(), r, MPI_DOUBLE, MPI_MAX, sub);
        MPI_Allreduce(MPI_IN_PLACE, destroy.data(), r, MPI_DOUBLE, MPI_MAX, sub);
        auto sm = spread_of(make);
        rows.push_back({"window set-up, 1 MiB per rank", fmt::format("{} ranks: construction", k), "us", sm, ""});
        rows.push_back({"window set-up, 1 MiB per rank", fmt::format("{} ranks: destruction", k), "us", spread_of(destroy), ""});
        if (k == 2) {
          verdicts.push_back(fmt::format("set-up for 2 ranks: median {:.0f} us (target <= 2000 us): {}",
                                         sm.median, sm.median <= 2000 ? "met" : "missed"));
        }
        MPI_Comm_free(&sub);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memarea-bench-mpi: rank %d: %s\n", g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (g_rank == 0) {
    std::printf("\n%-34s %-38s %32s  %s\n", "case", "path", "min - median - max", "");
    nlohmann::json out = nlohmann::json::array();
    for (auto& r : rows) {
      std::printf("%-34s %-38s %10.1f - %9.1f - %9.1f %s  %s\n", r.group.c_str(), r.variant.c_str(),
                  r.s.min, r.s.median, r.s.max, r.unit.c_str(), r.note.c_str());
      out.push_back({{"group", r.group}, {"variant", r.variant}, {"unit", r.unit},
                     {"min", r.s.min}, {"median", r.s.median}, {"max", r.s.max}, {"note", r.note}});
    }
    std::printf("\n");
    for (auto& v : verdicts) std::printf("target: %s\n", v.c_str());
    std::printf("bytes checked: %s\n", failures ? "MISMATCH" : "every path delivered the neighbours' bytes");
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
  }
  MPI_Finalize();
  return failures ? 1 : 0;
}
