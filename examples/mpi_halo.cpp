// A 1-D halo exchange between the ranks of each node through a memarea::mpi::shared_window.
//
// Every rank owns `cells` values of a periodic 1-D domain, spread over its node's ranks in node
// rank order, with `halo` ghost cells on each side. Its window segment holds
// [left halo | interior | right halo]. Each step a rank writes its interior (here from the host;
// a real code runs a kernel), then puts its first `halo` cells into the left neighbour's right
// halo and its last `halo` cells into the right neighbour's left halo, straight into their
// segments, and fences. Every halo is then checked against what the neighbour wrote.
//
//   mpirun -np 4 example_mpi_halo [--steps 100] [--cells 4096] [--halo 8]
//   (sim: MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=2)
#include <memarea/copy.hpp>
#include <memarea/mpi.hpp>
#include <memarea/stream.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

/// The value of global cell i after step s: any rank can compute what a neighbour holds.
double value(int step, long cell) { return step * 1e6 + static_cast<double>(cell) * 0.5; }

long arg(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atol(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int steps = static_cast<int>(arg(argc, argv, "--steps", 100));
  const long cells = arg(argc, argv, "--cells", 4096);
  const long halo = arg(argc, argv, "--halo", 8);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (steps < 1 || halo < 1 || cells < halo) {
    if (rank == 0) std::fprintf(stderr, "mpi_halo: need steps >= 1 and cells >= halo >= 1\n");
    MPI_Finalize();
    return 2;
  }
  int bad = 0;
  try {
    const std::size_t cell = sizeof(double);
    memarea::mpi::shared_window win(MPI_COMM_WORLD, (cells + 2 * halo) * cell);
    const int me = win.node_rank(), n = win.node_size();
    const int left = (me + n - 1) % n, right = (me + 1) % n;
    // The neighbours' segments, valid in this process; where this rank's device cannot reach
    // one (win.can_access), memarea::copy stages through pinned host memory.
    auto* mine = static_cast<char*>(win.local());
    auto* to_left = static_cast<char*>(win.remote(left));
    auto* to_right = static_cast<char*>(win.remote(right));
    memarea::stream s(win.device());
    std::vector<double> interior(cells), got(2 * halo);
    for (int step = 1; step <= steps; ++step) {
      // 1. This rank's interior for this step (its global cells me*cells ...).
      for (long i = 0; i < cells; ++i) interior[i] = value(step, me * cells + i);
      memarea::copy_async(mine + halo * cell, interior.data(), cells * cell, s);
      // 2. The halos: first cells into the left neighbour's right halo, last cells into the
      // right neighbour's left halo.
      memarea::copy_async(to_left + (halo + cells) * cell, mine + halo * cell, halo * cell, s);
      memarea::copy_async(to_right, mine + cells * cell, halo * cell, s);
      // 3. Every rank's copies are complete and visible after the fence.
      win.fence(s);
      // 4. Check: the left halo holds the left neighbour's last cells, the right halo the
      // right neighbour's first ones (periodic across the node).
      memarea::copy(got.data(), mine, halo * cell);
      memarea::copy(got.data() + halo, mine + (halo + cells) * cell, halo * cell);
      for (long j = 0; j < halo; ++j) {
        bad += got[j] != value(step, left * cells + cells - halo + j);
        bad += got[halo + j] != value(step, right * cells + j);
      }
      // 5. Nobody writes the next step's halos before every rank has read this step's.
      win.fence(s);
    }
    if (bad) {
      std::fprintf(stderr, "mpi_halo: rank %d: %d halo values wrong\n", rank, bad);
    } else if (me == 0) {
      std::printf("mpi_halo: %d steps on a node of %d ranks (rank %d first), %ld cells and %ld "
                  "halo cells per side each: every halo checked\n",
                  steps, n, rank, cells, halo);
    }
  } catch (const memarea::mpi::collective_error& e) {
    std::fprintf(stderr, "mpi_halo: rank %d: %s\n", rank, e.what());
    if (!e.communicator_usable()) MPI_Abort(MPI_COMM_WORLD, 1);  // MPI's rule: nothing else works
    bad = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_halo: rank %d: %s\n", rank, e.what());
    bad = 1;
  }
  MPI_Finalize();
  return bad ? 1 : 0;
}
