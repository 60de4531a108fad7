// Uses an installed libmemarea_mpi from C++ (memarea/mpi.hpp): a window and share() over
// MPI_COMM_WORLD, data checked through the node queries both share. Exit status 0 on every
// rank when every check passed.
#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/mpi.hpp>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1, status = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    memarea::mpi::shared_window win(MPI_COMM_WORLD, 4096);
    const int next = (win.node_rank() + 1) % win.node_size();
    memarea::copy(win.remote(next), &rank, sizeof rank);
    win.fence();
    int got = -1;
    memarea::copy(&got, win.local(), sizeof got);
    const int prev = (win.node_rank() + win.node_size() - 1) % win.node_size();
    memarea::buffer mine = memarea::area(win.device()).allocate(256);
    auto shared = memarea::mpi::share(MPI_COMM_WORLD, mine);
    if (got != win.rank_of(prev) || shared.node_size() != win.node_size() ||
        shared.rank_of(prev) != win.rank_of(prev) || shared.size(prev) < 256) {
      std::printf("rank %d: got %d from node rank %d\n", rank, got, prev);
      status = 1;
    } else {
      std::printf("rank %d: C++ window and share() of %d ranks work\n", rank, win.node_size());
    }
    shared.close();
    win.destroy();
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", rank, e.what());
    status = 1;
  }
  MPI_Finalize();
  return status;
}
