// memarea-bench-mpi's halo exchange (bench_mpi.cpp): one rank's step by each path the bench
// times (the window, in turns, staged through host; MPI_Sendrecv staged by hand and CUDA-aware;
// the device's own copies), the data each rank sends, and the untimed check of what a step
// delivered.
#pragma once

#include <memarea/copy.hpp>
#include <memarea/mpi.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace memarea_bench_mpi {

/// A size as the rows write it: "64 KiB", "16 MiB".
inline std::string size_name(std::size_t n) {
  if (n >= (std::size_t{1} << 20)) return fmt::format("{} MiB", n >> 20);
  return fmt::format("{} KiB", n >> 10);
}

/// n pseudo-random bytes of seed.
inline std::vector<unsigned char> pattern(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 gen(seed * 0x9e3779b97f4a7c15ull + 7);
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t x = gen();
    std::memcpy(v.data() + i, &x, std::min<std::size_t>(8, n - i));
  }
  return v;
}

/// One rank's halo exchange of `side` bytes per side in a periodic ring over the node, by each
/// path: it sends its first `side` bytes of `send` to its left neighbour and its last ones to
/// its right one. Halos: [from the left | from the right].
struct halo {
  std::size_t side = 0;
  memarea::mpi::shared_window* win = nullptr;
  int left = 0, right = 0;            ///< node ranks
  int left_rank = 0, right_rank = 0;  ///< ranks of MPI_COMM_WORLD
  char* send = nullptr;               ///< device: [first side bytes | last side bytes]
  char* recv = nullptr;               ///< device: the MPI_Sendrecv paths' halos
  char* host_send = nullptr;          ///< pinned host staging
  char* host_recv = nullptr;
  char* host_stage = nullptr;         ///< pinned host: the window's host-staged copies
  memarea::stream* s = nullptr;
  MPI_Comm node = MPI_COMM_NULL;  ///< the window's node communicator
  int turn = 0;                   ///< this rank's place among the node ranks on its device
  int turns = 1;                  ///< the most node ranks that share one device

  /// The window's step where ranks share a device: they take turns, one rank of each device
  /// copying at a time (ranks of different devices copy at once), each turn ended by the node
  /// barrier after its copies completed; the last barrier is the fence. The GPU runs one
  /// process's context at a time: two processes queueing work at once make it switch between
  /// them.
  void window_turns() const {
    for (int t = 0; t < turns; ++t) {
      if (t == turn) {
        copies();
        s->synchronize();
      }
      MPI_Barrier(node);
    }
  }

  /// Into the left neighbour's right halo and the right one's left halo, then the fence.
  void window() const {
    copies();
    win->fence(*s);
  }
  /// The window's step with its copies staged through pinned host memory: this rank's send
  /// bytes to the host, then from there into the neighbours' segments, on the stream, then the
  /// fence. Where processes share a GPU, device-to-device copies of two processes wait for
  /// each other's time slices; copies to and from host memory do not (docs/mpi.md).
  void window_staged() const {
    memarea::copy_async(host_stage, send, 2 * side, *s);
    memarea::copy_async(static_cast<char*>(win->remote(left)) + side, host_stage, side, *s);
    memarea::copy_async(win->remote(right), host_stage + side, side, *s);
    win->fence(*s);
  }
  /// The window step's copies alone, queued on the stream.
  void copies() const {
    memarea::copy_async(static_cast<char*>(win->remote(left)) + side, send, side, *s);
    memarea::copy_async(win->remote(right), send + side, side, *s);
  }
  void mpi(const char* sendbuf, char* recvbuf) const {
    const int count = static_cast<int>(side);
    MPI_Sendrecv(sendbuf, count, MPI_BYTE, left_rank, 1, recvbuf + side, count, MPI_BYTE,
                 right_rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(sendbuf + side, count, MPI_BYTE, right_rank, 2, recvbuf, count, MPI_BYTE,
                 left_rank, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  void staged() const {
    memarea::copy(host_send, send, 2 * side);
    mpi(host_send, host_recv);
    memarea::copy(recv, host_recv, 2 * side);
  }
  void aware() const { mpi(send, recv); }
  /// The same bytes, within this rank's own device, fenced alike.
  void device_copy() const {
    memarea::copy_async(recv + side, send, side, *s);
    memarea::copy_async(recv, send + side, side, *s);
    win->fence(*s);
  }
  char* link_left = nullptr;   ///< this rank's own buffer on its left neighbour's device
  char* link_right = nullptr;  ///< and on its right neighbour's device
  /// Where neighbours are on other devices: the same bytes copied by this process into buffers
  /// of its own on the neighbours' devices (a peer copy, no IPC), fenced alike. The bandwidth the
  /// devices' copy engines and the link between them give, which bounds the window's halo there.
  void link_copy() const {
    memarea::copy_async(link_left, send, side, *s);
    memarea::copy_async(link_right, send + side, side, *s);
    win->fence(*s);
  }
};

/// This rank's send data for a side: random per rank and size, so that a check finds any byte in
/// the wrong place.
inline std::vector<unsigned char> send_data(int rank, std::size_t side) {
  return pattern(std::uint64_t(rank) * 977 + side, 2 * side);
}

/// Zeroes 2 * side bytes of a halo (untimed), so that a check tells what a step delivered.
inline void clear(void* halos, std::size_t side) {
  memarea::copy(halos, std::vector<unsigned char>(2 * side).data(), 2 * side);
}

/// What a rank's halos must hold after a step: its neighbours' send data.
struct expected_halos {
  std::vector<unsigned char> left, right;
  explicit expected_halos(const halo& h)
      : left(send_data(h.left_rank, h.side)), right(send_data(h.right_rank, h.side)) {}
};

/// Checks (untimed, collective) that the halos hold the neighbours' data, byte for byte; counts a
/// failure on every rank when any rank's differ.
inline void check_halos(const halo& h, const expected_halos& e, const char* what,
                        const char* halos, int& failures) {
  const std::size_t side = h.side;
  std::vector<unsigned char> got(2 * side);
  memarea::copy(got.data(), halos, 2 * side);
  bool ok = std::memcmp(got.data(), e.left.data() + side, side) == 0 &&
            std::memcmp(got.data() + side, e.right.data(), side) == 0;
  int all_ok = ok;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) {
    ++failures;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      std::fprintf(stderr, "%s %s: received bytes differ\n", what, size_name(side).c_str());
  }
}

}  // namespace memarea_bench_mpi
