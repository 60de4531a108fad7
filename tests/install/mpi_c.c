/* Uses an installed libmemarea_mpi from C (memarea/mpi.h): a window over MPI_COMM_WORLD, each
 * rank writes its rank into the next node rank's segment, fences, and checks what it got.
 * Exit status 0 on every rank when every check passed. */
#include <memarea/mpi.h>

#include <stdio.h>

int main(int argc, char **argv) {
  memarea_mpi_window_t win = NULL;
  void *local = NULL, *next = NULL;
  int rank = -1, node_rank = -1, node_size = 0, got = -1, ok = 1;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (memarea_mpi_window_create(&win, MPI_COMM_WORLD, 4096, NULL, NULL) != MEMAREA_SUCCESS ||
      memarea_mpi_window_node_rank(win, &node_rank, &node_size) != MEMAREA_SUCCESS ||
      memarea_mpi_window_local(win, &local) != MEMAREA_SUCCESS ||
      memarea_mpi_window_remote(win, (node_rank + 1) % node_size, &next) != MEMAREA_SUCCESS ||
      memarea_memcpy(next, &rank, sizeof rank) != MEMAREA_SUCCESS ||
      memarea_mpi_window_fence(win) != MEMAREA_SUCCESS ||
      memarea_memcpy(&got, local, sizeof got) != MEMAREA_SUCCESS ||
      memarea_mpi_window_destroy(win) != MEMAREA_SUCCESS) {
    printf("rank %d: %s\n", rank, memarea_last_error_message());
    ok = 0;
  } else if (node_size < 2 || got != (node_rank + node_size - 1) % node_size) {
    /* One node here (MPI_COMM_WORLD on one host): node ranks are the ranks. */
    printf("rank %d: node of %d ranks, got %d from the previous rank\n", rank, node_size, got);
    ok = 0;
  } else {
    printf("rank %d: C window of %d ranks works\n", rank, node_size);
  }
  MPI_Finalize();
  return ok ? 0 : 1;
}
