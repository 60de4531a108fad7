// memarea-bench-mpi: the MPI window's bench, a program of its own so that the
// `memarea` CLI never depends on MPI. Run it under mpirun:
//   mpirun -np 2 memarea-bench-mpi [--quick] [--reps N] [--ranks-per-device K] [--json FILE]
// --ranks-per-device K puts node ranks K at a time on one device (0..K-1 on device 0, ...), so
// that with K >= 2 each rank has a neighbour on its own device; without it the window's default
// spreads them (node rank % device count).
// Rows, side by side in one run, with min-median-max of every figure:
//  * halo exchange of 4 KiB to 256 MiB per side between the ranks of a node (each rank sends
//    its first `side` bytes to its left neighbour and its last `side` bytes to its right one,
//    periodic), through the window (copies into the neighbours' segments, then a fence), against
//    MPI_Sendrecv of the same device buffers: CUDA-aware where the MPI is (MPIX_Query_cuda_support,
//    looked up at run time), and always staged through pinned host buffers by hand. And the
//    device's own copy bandwidth: every rank copies the same bytes within its own device at
//    once, fenced alike; where neighbours are on other devices, the device's copy to them: every
//    rank copies the same bytes into buffers of its own on its neighbours' devices (a peer copy
//    in one process, no IPC), fenced alike. Where ranks share a device, also the window with
//    those ranks taking turns, and the window with its copies staged through pinned host memory
//    (device-to-device work of processes sharing a GPU waits for their time slices; host copies
//    do not). Each step's time is the slowest rank's; the received bytes of every path are
//    checked against the senders' random data (untimed).
//  * window set-up (construction) and destruction time against the number of ranks.
//  * at 64 KiB per side, after those rows: cold (the process's first halo step through a
//    window and its first staged MPI_Sendrecv; the first step through each new window or new
//    buffers), idle-then-warm (one step after every rank paused 70 ms), and a diagnostic split
//    of the window's step (its copies with a stream synchronize and no barrier; its fence with
//    no copies; MPI_Barrier for reference; one rank's copies while the others make no device
//    call; the staged path's device-to-host copy alone), each side by side with the
//    MPI_Sendrecv paths.
#include "bench_mpi_halo.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/mpi.hpp>
#include <memarea/peer.hpp>
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
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace memarea_bench_mpi;
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

/// Whether CUDA shares `device`'s contexts through MPS (CU_DEVICE_ATTRIBUTE_MPS_ENABLED, asked
/// of the libcuda memarea loaded): 1 yes, 0 no, -1 unknown (another backend, or a driver that
/// cannot say). Where ranks share a device without MPS, their device work takes turns in time
/// slices (docs/mpi.md), which decides what the window's rows are held to.
int mps_enabled(int device) {
  if (memarea::backend_name() != "cuda") return -1;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return -1;
  using get_fn = int (*)(int*, int);
  using attr_fn = int (*)(int*, int, int);
  constexpr int kMpsEnabled = 133;  // CU_DEVICE_ATTRIBUTE_MPS_ENABLED (cuda.h, CUDA 11.0+)
  auto get = reinterpret_cast<get_fn>(dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<attr_fn>(dlsym(lib, "cuDeviceGetAttribute"));
  int dev = 0, v = 0;
  const bool ok = get && attr && get(&dev, device) == 0 && attr(&v, kMpsEnabled, dev) == 0;
  dlclose(lib);
  return ok ? (v != 0 ? 1 : 0) : -1;
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

/// The size of the cold, idle-then-warm and split rows.
constexpr std::size_t kProbeSide = 64 << 10;
/// How long every rank pauses before an idle-then-warm step.
constexpr std::chrono::milliseconds kIdlePause{70};

/// One step, timed on every rank from a common start (a barrier), the slowest rank's time
/// (microseconds). With a pause, every rank first sleeps that long, making no MPI or device
/// call, then meets the others in the barrier.
double time_one(MPI_Comm comm, const std::function<void()>& step,
                std::chrono::milliseconds pause = std::chrono::milliseconds{0}) {
  if (pause.count() > 0) std::this_thread::sleep_for(pause);
  MPI_Barrier(comm);
  auto a = clock_type::now();
  step();
  double t = std::chrono::duration<double, std::micro>(clock_type::now() - a).count();
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
  return t;
}

/// "N.NNx faster than the faster MPI_Sendrecv" for a window figure against the MPI paths'.
std::string against_mpi(double window, double staged, double aware) {
  const double best = aware > 0 ? std::min(aware, staged) : staged;
  return ratio_text(window, best) + " than the faster MPI_Sendrecv";
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  bool quick = false;
  int reps = 30;
  std::string json_path;
  int per_device = 0;  // 0: the window's default device (node rank % device count)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(3, std::atoi(argv[++i]));
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--ranks-per-device" && i + 1 < argc) {
      per_device = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--help" || a == "-h") {
      if (g_rank == 0) std::printf("usage: mpirun -np N memarea-bench-mpi [--quick] [--reps N] "
                                   "[--ranks-per-device K] [--json FILE]\n");
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
  std::vector<result_row> extra;  // the cold, idle and split rows: printed after the others
  int failures = 0;
  std::vector<std::string> verdicts;
  try {
    const bool aware = mpi_cuda_aware();
    const std::vector<std::size_t> sides =
        quick ? std::vector<std::size_t>{4 << 10, 64 << 10, 1 << 20}
              : std::vector<std::size_t>{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
    const std::size_t biggest = sides.back();
    mm::options layout;
    if (per_device > 0) {
      MPI_Comm node = MPI_COMM_NULL;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
      int node_rank = 0;
      MPI_Comm_rank(node, &node_rank);
      MPI_Comm_free(&node);
      layout.device = (node_rank / per_device) % memarea::device_count();
    }
    mm::shared_window win(MPI_COMM_WORLD, 2 * biggest, layout);  // [left halo | right halo]
    const int me = win.node_rank(), n = win.node_size();
    const int left = (me + n - 1) % n, right = (me + 1) % n;
    const int left_rank = win.rank_of(left), right_rank = win.rank_of(right);
    memarea::area dev(win.device());
    memarea::area pinned(win.device(), memarea::area_flags::host);
    memarea::buffer send = dev.allocate(2 * biggest);   // [first side bytes | last side bytes]
    memarea::buffer recv = dev.allocate(2 * biggest);   // the Sendrecv paths' halos
    memarea::buffer hsend = pinned.allocate(2 * biggest);
    memarea::buffer hrecv = pinned.allocate(2 * biggest);
    memarea::buffer hstage = pinned.allocate(2 * biggest);
    memarea::stream s(win.device());
    // Where a neighbour is on another device: buffers of this rank's own there for the link
    // reference row (halo::link_copy), with peer access held for the bench's length.
    const int left_dev = win.device_of(left), right_dev = win.device_of(right);
    const bool cross = left_dev != win.device() || right_dev != win.device();
    const bool shares = left_dev == win.device() || right_dev == win.device();
    std::optional<memarea::buffer> link_left, link_right;
    std::vector<memarea::peer::scoped_access> link_access;
    if (cross) {
      link_left.emplace(memarea::area(left_dev).allocate(biggest));
      link_right.emplace(memarea::area(right_dev).allocate(biggest));
      for (int d : {left_dev, right_dev}) {
        const bool held = std::any_of(link_access.begin(), link_access.end(),
                                      [&](const auto& a) { return a.peer() == d; });
        if (d != win.device() && !held && memarea::peer::can_access(win.device(), d))
          link_access.emplace_back(win.device(), d);
      }
    }
    // Each rank's place among the node's ranks on its device, and how many share one device.
    int turn = 0, turns = 1;
    {
      std::vector<int> devs(static_cast<std::size_t>(n));
      const int mine = win.device();
      MPI_Allgather(&mine, 1, MPI_INT, devs.data(), 1, MPI_INT, win.node_comm());
      for (int r = 0; r < n; ++r) {
        const int on_dev = static_cast<int>(std::count(devs.begin(), devs.begin() + r + 1, devs[static_cast<std::size_t>(r)]));
        turns = std::max(turns, on_dev);
        if (r == me) turn = on_dev - 1;
      }
    }
    // Whether every rank's device shares its contexts through MPS (the lowest answer wins):
    // where CUDA says it does not, ranks that share a device take turns on it. Elsewhere
    // (unknown: the sim, HIP) the window's targets hold as for any layout.
    int mps = mps_enabled(win.device());
    MPI_Allreduce(MPI_IN_PLACE, &mps, 1, MPI_INT, MPI_MIN, win.node_comm());
    const bool time_sliced = turns > 1 && mps == 0;
    // The window's node communicator, for the turns' barriers (the fresh windows below set
    // their own).
    MPI_Comm node_c = win.node_comm();
    auto* halo_mem = static_cast<char*>(win.local());
    auto* rb = static_cast<char*>(recv.data());
    auto make_halo = [&](std::size_t side) {
      halo h;
      h.side = side;
      h.win = &win;
      h.left = left, h.right = right, h.left_rank = left_rank, h.right_rank = right_rank;
      h.send = static_cast<char*>(send.data());
      h.recv = rb;
      h.host_send = static_cast<char*>(hsend.data());
      h.host_recv = static_cast<char*>(hrecv.data());
      h.host_stage = static_cast<char*>(hstage.data());
      h.s = &s;
      h.node = node_c;
      h.turn = turn;
      h.turns = turns;
      if (cross) {
        h.link_left = static_cast<char*>(link_left->data());
        h.link_right = static_cast<char*>(link_right->data());
      }
      return h;
    };
    if (g_rank == 0) {
      std::printf("memarea-bench-mpi: %d ranks, node of %d, backend %s, device %d; MPI_Sendrecv "
                  "paths: staged through pinned host memory%s; %d repetitions; ranks per GPU "
                  "at most %d, MPS %s\n",
                  world, n, memarea::backend_name().c_str(), win.device(),
                  aware ? ", CUDA-aware" : " (the MPI is not CUDA-aware)", reps, turns,
                  mps == 1 ? "on" : mps == 0 ? "off" : "unknown");
    }

    // Cold, first of all: the process's first halo step through a window (this one, just made)
    // and its first staged MPI_Sendrecv (then its first CUDA-aware one), 64 KiB per side. One
    // sample each per process; the destinations are cleared and the data written first
    // (untimed), and each path's bytes are checked after its step.
    {
      const halo h = make_halo(kProbeSide);
      const expected_halos e(h);
      auto data = send_data(g_rank, kProbeSide);
      memarea::copy(h.send, data.data(), 2 * kProbeSide);
      clear(halo_mem, kProbeSide);
      clear(rb, kProbeSide);
      const double tw = time_one(MPI_COMM_WORLD, [&] { h.window(); });
      check_halos(h, e, "window (cold)", halo_mem, failures);
      const double ts = time_one(MPI_COMM_WORLD, [&] { h.staged(); });
      check_halos(h, e, "staged MPI_Sendrecv (cold)", rb, failures);
      double ta = 0;
      if (aware) {
        clear(rb, kProbeSide);
        ta = time_one(MPI_COMM_WORLD, [&] { h.aware(); });
        check_halos(h, e, "CUDA-aware MPI_Sendrecv (cold)", rb, failures);
      }
      const std::string g = "cold 64 KiB, process's first";
      extra.push_back({g, "window: first step (copies + fence)", "us", {tw, tw, tw},
                       against_mpi(tw, ts, ta) + "; 1 sample per process"});
      extra.push_back({g, "MPI_Sendrecv staged by hand: first", "us", {ts, ts, ts},
                       "1 sample per process; after the window's first step"});
      if (aware) extra.push_back({g, "MPI_Sendrecv CUDA-aware: first", "us", {ta, ta, ta}, "1 sample per process"});
    }

    for (std::size_t side : sides) {
      const halo h = make_halo(side);
      auto data = send_data(g_rank, side);
      memarea::copy(h.send, data.data(), 2 * side);
      auto via_window = [&] { h.window(); };
      auto via_turns = [&] { h.window_turns(); };
      auto via_window_staged = [&] { h.window_staged(); };
      auto via_staged = [&] { h.staged(); };
      auto via_aware = [&] { h.aware(); };
      auto device_copy = [&] { h.device_copy(); };
      auto via_link = [&] { h.link_copy(); };
      // Checks (untimed): the halos hold the neighbours' data, byte for byte.
      const expected_halos expect(h);
      auto check = [&](const char* what, const char* halos) {
        check_halos(h, expect, what, halos, failures);
      };
      clear(halo_mem, side);
      MPI_Barrier(MPI_COMM_WORLD);
      via_window();
      check("window", halo_mem);
      if (turns > 1) {
        clear(halo_mem, side);
        MPI_Barrier(MPI_COMM_WORLD);
        via_turns();
        check("window, in turns", halo_mem);
        clear(halo_mem, side);
        MPI_Barrier(MPI_COMM_WORLD);
        via_window_staged();
        check("window, staged through host", halo_mem);
      }
      clear(rb, side);
      via_staged();
      check("staged MPI_Sendrecv", rb);
      if (aware) {
        clear(rb, side);
        via_aware();
        check("CUDA-aware MPI_Sendrecv", rb);
      }
      if (cross) {  // each neighbour's buffer holds the side this rank sends it
        const std::vector<unsigned char> zeros(side);
        memarea::copy(h.link_left, zeros.data(), side);
        memarea::copy(h.link_right, zeros.data(), side);
        via_link();
        std::vector<unsigned char> got(side);
        memarea::copy(got.data(), h.link_left, side);
        if (std::memcmp(got.data(), data.data(), side) != 0) {
          std::fprintf(stderr, "rank %d: link copy %zu B to the left device: wrong bytes\n",
                       g_rank, side);
          ++failures;
        }
        memarea::copy(got.data(), h.link_right, side);
        if (std::memcmp(got.data(), data.data() + side, side) != 0) {
          std::fprintf(stderr, "rank %d: link copy %zu B to the right device: wrong bytes\n",
                       g_rank, side);
          ++failures;
        }
      }
      // Timed, in turns so that drift slows every path alike.
      const int r = side >= (16u << 20) ? std::max(3, reps / 3) : reps;
      std::vector<double> tw, tt, tws, ts, ta, td, tl;
      for (int i = 0; i < r; ++i) {
        auto one = [&](std::vector<double>& into, const std::function<void()>& f) {
          into.push_back(time_steps(1, MPI_COMM_WORLD, f)[0]);
        };
        one(tw, via_window);
        if (turns > 1) one(tt, via_turns);
        if (turns > 1) one(tws, via_window_staged);
        one(ts, via_staged);
        if (aware) one(ta, via_aware);
        one(td, device_copy);
        if (cross) one(tl, via_link);
      }
      const std::string g = "halo " + size_name(side) + " per side";
      auto w = spread_of(tw), st = spread_of(ts), d = spread_of(td);
      spread a{};
      if (aware) a = spread_of(ta);
      double best_mpi = aware ? std::min(a.median, st.median) : st.median;
      rows.push_back({g, "window (copies + fence)", "us", w, ratio_text(w.median, best_mpi) + " than the faster MPI_Sendrecv"});
      spread tts{}, twss{};
      if (turns > 1) {
        tts = spread_of(tt);
        rows.push_back({g, fmt::format("window, {} ranks a GPU in turns", turns), "us", tts,
                        ratio_text(tts.median, best_mpi) + " than the faster MPI_Sendrecv"});
        twss = spread_of(tws);
        rows.push_back({g, "window, copies staged through host", "us", twss,
                        ratio_text(twss.median, best_mpi) + " than the faster MPI_Sendrecv"});
      }
      rows.push_back({g, "MPI_Sendrecv staged by hand", "us", st, ""});
      if (aware) rows.push_back({g, "MPI_Sendrecv CUDA-aware", "us", a, ""});
      rows.push_back({g, "device copy (same bytes, own device)", "us", d,
                      fmt::format("window {:.1f} GB/s, device {:.1f} GB/s per rank",
                                  2.0 * side / w.median / 1e3, 2.0 * side / d.median / 1e3)});
      spread l{};
      if (cross) {
        l = spread_of(tl);
        rows.push_back({g, "device copy to the neighbours' devices (same bytes, no IPC)", "us", l,
                        fmt::format("window {:.1f} GB/s, link {:.1f} GB/s per rank",
                                    2.0 * side / w.median / 1e3, 2.0 * side / l.median / 1e3)});
      }
      if (side == (64u << 10)) {
        // Where ranks share a device without MPS, the window's device copies wait for the other
        // processes' time slices, a few hundred microseconds whatever the size (docs/mpi.md):
        // its rows are reported, and the path for that layout, the window's copies staged
        // through host memory, carries the target.
        const char* sliced = "n/a for this layout (ranks share a GPU without MPS: their device "
                             "work takes turns; the staged row below carries the target)";
        double x = best_mpi / w.median;
        if (time_sliced)
          verdicts.push_back(fmt::format("64 KiB: window {:.2f}x the faster MPI_Sendrecv: {}", x,
                                         sliced));
        else
          verdicts.push_back(fmt::format("64 KiB: window {:.2f}x the faster MPI_Sendrecv (target "
                                         ">= 2x): {}", x, x >= 2 ? "met" : "missed"));
        if (turns > 1) {
          const double xt = best_mpi / tts.median;
          if (time_sliced)
            verdicts.push_back(fmt::format("64 KiB: window, ranks of a GPU in turns, {:.2f}x the "
                                           "faster MPI_Sendrecv: {}", xt, sliced));
          else
            verdicts.push_back(fmt::format("64 KiB: window, ranks of a GPU in turns, {:.2f}x the "
                                           "faster MPI_Sendrecv (target >= 2x): {}",
                                           xt, xt >= 2 ? "met" : "missed"));
          const double xs = best_mpi / twss.median;
          verdicts.push_back(fmt::format("64 KiB: window, copies staged through host, {:.2f}x "
                                         "the faster MPI_Sendrecv (target >= 2x): {}",
                                         xs, xs >= 2 ? "met" : "missed"));
        }
      }
      if (side == (256u << 20)) {
        // Against the copy within the rank's own memory only where a neighbour's halo is on
        // this device: with every neighbour elsewhere the links bound the window, not it.
        const double x = d.median / w.median;
        if (shares)
          verdicts.push_back(fmt::format("256 MiB: window {:.2f}x the device's copy bandwidth "
                                         "within its own memory (target >= 0.9x{}): {}",
                                         x, cross ? " where neighbours share the device" : "",
                                         x >= 0.9 ? "met" : "missed"));
        else
          verdicts.push_back(fmt::format("256 MiB: window {:.2f}x the device's copy bandwidth "
                                         "within its own memory: n/a for this layout (no "
                                         "neighbour of rank 0 shares its device)",
                                         x));
        if (cross) {  // the halo crosses to other devices: their copy bandwidth bounds it
          const double xl = l.median / w.median;
          verdicts.push_back(fmt::format("256 MiB: window {:.2f}x the device's copy bandwidth to "
                                         "the neighbours' devices (target >= 0.9x): {}",
                                         xl, xl >= 0.9 ? "met" : "missed"));
        }
      }
      if (side != kProbeSide) continue;

      // Idle-then-warm: one step after every rank paused 70 ms (no MPI, no device call), then
      // met in a barrier. In turns, which path goes first alternating; each destination is
      // cleared before the pause and checked after the step.
      {
        const int samples = quick ? 3 : 15;
        std::vector<double> iw, is, ia;
        auto idle_one = [&](std::vector<double>& into, const std::function<void()>& f,
                            char* dest, const char* what) {
          clear(dest, side);
          into.push_back(time_one(MPI_COMM_WORLD, f, kIdlePause));
          check(what, dest);
        };
        for (int i = 0; i < samples; ++i) {
          auto mpi_paths = [&] {
            idle_one(is, via_staged, rb, "staged MPI_Sendrecv (idle)");
            if (aware) idle_one(ia, via_aware, rb, "CUDA-aware MPI_Sendrecv (idle)");
          };
          if (i % 2) mpi_paths();
          idle_one(iw, via_window, halo_mem, "window (idle)");
          if (!(i % 2)) mpi_paths();
        }
        const std::string ig = "idle 70 ms, then 64 KiB per side";
        auto wi = spread_of(iw), si = spread_of(is);
        const spread ai = aware ? spread_of(ia) : spread{};
        extra.push_back({ig, "window (copies + fence)", "us", wi,
                         against_mpi(wi.median, si.median, ai.median) +
                             fmt::format("; {:.2f}x the warm step's median", wi.median / w.median)});
        extra.push_back({ig, "MPI_Sendrecv staged by hand", "us", si,
                         fmt::format("{:.2f}x the warm step's median", si.median / st.median)});
        if (aware) {
          extra.push_back({ig, "MPI_Sendrecv CUDA-aware", "us", ai,
                           fmt::format("{:.2f}x the warm step's median", ai.median / a.median)});
        }
      }

      // Diagnostic split of the window's step, in turns with the whole step: its two copies
      // and a synchronize of their stream, with no barrier; its fence with nothing queued (an
      // empty stream's synchronize and the node barrier); MPI_Barrier over node_comm() for
      // reference. Each gets an untimed call first; the copies' bytes are checked after it.
      {
        MPI_Comm node = win.node_comm();
        auto copies_sync = [&] {
          h.copies();
          s.synchronize();
        };
        auto fence_only = [&] { win.fence(s); };
        auto barrier = [&] { MPI_Barrier(node); };
        // One rank's copies while the others make no device call (node rank 0's; the others
        // only meet it in the barrier): what a step's copies cost with the GPU to itself.
        auto one_rank = [&] {
          if (me == 0) copies_sync();
        };
        // The staged path's first part alone: every rank's device-to-host copy at once.
        auto staged_d2h = [&] { memarea::copy(h.host_send, h.send, 2 * side); };
        // What makes a step slow where processes share a GPU: the window's copies on the
        // device's default stream (memarea::copy, synchronous); the same bytes device to host
        // on the window's stream; device to device within the rank's own memory on the
        // default stream. Every rank at once.
        auto window_default_stream = [&] {
          memarea::copy(static_cast<char*>(win.remote(left)) + side, h.send, side);
          memarea::copy(win.remote(right), h.send + side, side);
        };
        auto d2h_on_stream = [&] {
          memarea::copy_async(h.host_send, h.send, 2 * side, s);
          s.synchronize();
        };
        auto d2d_default_stream = [&] { memarea::copy(h.recv, h.send, 2 * side); };
        clear(halo_mem, side);
        MPI_Barrier(MPI_COMM_WORLD);
        copies_sync();
        MPI_Barrier(MPI_COMM_WORLD);  // every rank's copies are done: the halos are complete
        check("window split: copies + stream synchronize", halo_mem);
        fence_only();
        barrier();
        std::vector<double> pw, pc, pf, pb, po, pd, pwd, pds2, pdd;
        for (int i = 0; i < reps; ++i) {
          pw.push_back(time_one(MPI_COMM_WORLD, via_window));
          pc.push_back(time_one(MPI_COMM_WORLD, copies_sync));
          pf.push_back(time_one(MPI_COMM_WORLD, fence_only));
          pb.push_back(time_one(MPI_COMM_WORLD, barrier));
          po.push_back(time_one(MPI_COMM_WORLD, one_rank));
          pd.push_back(time_one(MPI_COMM_WORLD, staged_d2h));
          pwd.push_back(time_one(MPI_COMM_WORLD, window_default_stream));
          pds2.push_back(time_one(MPI_COMM_WORLD, d2h_on_stream));
          pdd.push_back(time_one(MPI_COMM_WORLD, d2d_default_stream));
        }
        const std::string sg = "64 KiB window step, diagnostic";
        auto whole = spread_of(pw);
        auto share = [&](const spread& part) {
          return fmt::format("{:.0f}% of the whole step's median", 100 * part.median / whole.median);
        };
        extra.push_back({sg, "whole step (copies + fence)", "us", whole,
                         "measured in turns with its parts below"});
        const auto pcs = spread_of(pc), pfs = spread_of(pf), pbs = spread_of(pb);
        extra.push_back({sg, "copies + stream sync, no barrier", "us", pcs, share(pcs)});
        extra.push_back({sg, "fence alone, no copies (node barrier)", "us", pfs,
                         share(pfs) + "; moves no bytes"});
        extra.push_back({sg, "MPI_Barrier of node_comm() (reference)", "us", pbs,
                         share(pbs) + "; moves no bytes"});
        const auto pos = spread_of(po), pds = spread_of(pd);
        extra.push_back({sg, "node rank 0's copies + sync, others idle", "us", pos,
                         share(pos) + "; the GPU to one process"});
        extra.push_back({sg, "staged path's device-to-host copy alone", "us", pds,
                         share(pds) + "; every rank at once, 2 x 64 KiB each"});
        const auto pwds = spread_of(pwd), pds2s = spread_of(pds2), pdds = spread_of(pdd);
        extra.push_back({sg, "window's copies on the default stream", "us", pwds,
                         share(pwds) + "; memarea::copy, every rank at once, no barrier"});
        extra.push_back({sg, "device-to-host on the window's stream", "us", pds2s,
                         share(pds2s) + "; copy_async + synchronize, every rank at once"});
        extra.push_back({sg, "own device-to-device, default stream", "us", pdds,
                         share(pdds) + "; memarea::copy, every rank at once"});
      }
    }
    win.destroy();

    // Cold, repeated: the first step through a window made just before (untimed), against the
    // first staged MPI_Sendrecv through pinned and device buffers allocated just before
    // (untimed), 64 KiB per side, in turns, which goes first alternating; each checked.
    {
      const int samples = quick ? 3 : 10;
      const std::size_t side = kProbeSide;
      std::vector<double> fw, fs;
      const expected_halos expect(make_halo(side));
      auto fresh_window = [&] {
        mm::shared_window w(MPI_COMM_WORLD, 2 * side);
        halo h = make_halo(side);
        h.win = &w;
        h.node = w.node_comm();
        clear(w.local(), side);
        fw.push_back(time_one(MPI_COMM_WORLD, [&] { h.window(); }));
        check_halos(h, expect, "window (cold, new window)", static_cast<const char*>(w.local()), failures);
        w.destroy();
      };
      auto fresh_staged = [&] {
        memarea::buffer hs = pinned.allocate(2 * side), hr = pinned.allocate(2 * side);
        memarea::buffer r = dev.allocate(2 * side);
        halo h = make_halo(side);
        h.host_send = static_cast<char*>(hs.data());
        h.host_recv = static_cast<char*>(hr.data());
        h.recv = static_cast<char*>(r.data());
        clear(h.recv, side);
        fs.push_back(time_one(MPI_COMM_WORLD, [&] { h.staged(); }));
        check_halos(h, expect, "staged MPI_Sendrecv (cold, new buffers)", h.recv, failures);
      };
      auto data = send_data(g_rank, side);
      memarea::copy(send.data(), data.data(), 2 * side);
      for (int i = 0; i < samples; ++i) {
        if (i % 2) fresh_staged();
        fresh_window();
        if (!(i % 2)) fresh_staged();
      }
      const std::string g = "cold 64 KiB, new window/buffers";
      auto fws = spread_of(fw), fss = spread_of(fs);
      extra.push_back({g, "window: first step of a new window", "us", fws,
                       ratio_text(fws.median, fss.median) + " than the staged MPI_Sendrecv's "
                       "first step through new buffers"});
      extra.push_back({g, "MPI_Sendrecv staged: new buffers", "us", fss,
                       "first step through new pinned staging and device receive buffers"});
    }

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
  rows.insert(rows.end(), extra.begin(), extra.end());
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
