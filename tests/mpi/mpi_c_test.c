/* libmemarea_mpi's C API, as a C99 program: a window and share() with data checked byte for
 * byte, bad arguments refused with a status and a message, and memarea_mpi_last_failure. Writes
 * its verdict to $MEMAREA_MPI_TEST_RESULTS/rank-N (tests/mpi/run_mpi_test.sh). */
#include <memarea/mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1;
static int failures = 0;
static char first_failure[512];

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      if (!failures++) snprintf(first_failure, sizeof first_failure, "line %d: %s (%s)", \
                                __LINE__, #cond, memarea_last_error_message());      \
    }                                                                                \
  } while (0)

static void fill(unsigned char *p, size_t n, unsigned seed) {
  size_t i;
  unsigned x = seed * 2654435761u + 1u;
  for (i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    p[i] = (unsigned char)(x >> 16);
  }
}

static void write_verdict(void) {
  const char *dir = getenv("MEMAREA_MPI_TEST_RESULTS");
  char path[4096];
  FILE *f;
  printf("rank %d: %s C API%s%s\n", rank, failures ? "FAIL" : "PASS", failures ? ": " : "",
         failures ? first_failure : "");
  if (!dir) return;
  snprintf(path, sizeof path, "%s/rank-%d", dir, rank);
  f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "%s C API%s%s\n", failures ? "FAIL" : "PASS", failures ? ": " : "",
          failures ? first_failure : "");
  fclose(f);
}

int main(int argc, char **argv) {
  enum { N = 65536 };
  memarea_mpi_window_t win = NULL;
  memarea_mpi_shared_t shared = NULL;
  memarea_mpi_options opts = MEMAREA_MPI_OPTIONS_INIT;
  memarea_mpi_failure kind;
  memarea_area_t area = NULL;
  unsigned char *host = malloc(N), *expect = malloc(N);
  void *local = NULL, *remote = NULL, *buf = NULL;
  int node_rank = -1, node_size = 0, r, can = -1, failed_rank = 0, sum = 0, one = 1;
  size_t size = 0;
  MPI_Comm node = MPI_COMM_NULL;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  /* A window: every rank's random bytes, read by every node peer. */
  CHECK(memarea_mpi_window_create(&win, MPI_COMM_WORLD, N, NULL, &opts) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_window_node_rank(win, &node_rank, &node_size) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_window_local(win, &local) == MEMAREA_SUCCESS);
  fill(host, N, (unsigned)rank);
  CHECK(memarea_memcpy(local, host, N) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_window_fence(win) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_window_node_comm(win, &node) == MEMAREA_SUCCESS);
  for (r = 0; r < node_size; ++r) {
    int world = -1;
    CHECK(memarea_mpi_window_remote(win, r, &remote) == MEMAREA_SUCCESS);
    CHECK(memarea_memcpy(host, remote, N) == MEMAREA_SUCCESS);
    /* node ranks follow world ranks here: the node communicator says which one r is */
    MPI_Group g, wg;
    MPI_Comm_group(node, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_translate_ranks(g, 1, &r, wg, &world);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    fill(expect, N, (unsigned)world);
    CHECK(memcmp(host, expect, N) == 0);
    CHECK(memarea_mpi_window_can_access(win, r, &can) == MEMAREA_SUCCESS && (can == 0 || can == 1));
  }
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, node);
  CHECK(sum == node_size);
  /* Bad arguments: a status and a message, nothing changed. */
  CHECK(memarea_mpi_window_remote(win, node_size, &remote) == MEMAREA_ERROR_INVALID_VALUE);
  CHECK(strstr(memarea_last_error_message(), "outside this node") != NULL);
  CHECK(memarea_mpi_window_remote(win, 0, NULL) == MEMAREA_ERROR_INVALID_VALUE);
  CHECK(memarea_mpi_window_local(NULL, &local) == MEMAREA_ERROR_INVALID_VALUE);
  CHECK(memarea_mpi_window_fence(win) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_window_destroy(win) == MEMAREA_SUCCESS);

  /* Options are checked before anything collective happens (every rank passes the same). */
  opts.timeout_seconds = -1;
  CHECK(memarea_mpi_window_create(&win, MPI_COMM_WORLD, N, NULL, &opts) ==
        MEMAREA_ERROR_INVALID_VALUE);
  opts.timeout_seconds = 60;
  opts.flags = 1;
  CHECK(memarea_mpi_window_create(&win, MPI_COMM_WORLD, N, NULL, &opts) ==
        MEMAREA_ERROR_INVALID_VALUE);
  opts.flags = 0;

  /* A window of a pooled area, and a failure of one rank seen by all: rank 0 asks for 0 bytes. */
  {
    memarea_pool_t pool = NULL;
    memarea_area_t dev = NULL, pooled = NULL;
    CHECK(memarea_area_create(&dev, 0, 0) == MEMAREA_SUCCESS);
    CHECK(memarea_pool_create(&pool, dev, NULL) == MEMAREA_SUCCESS);
    CHECK(memarea_area_create_pooled(&pooled, pool) == MEMAREA_SUCCESS);
    CHECK(memarea_mpi_window_create(&win, MPI_COMM_WORLD, 1000, pooled, NULL) == MEMAREA_SUCCESS);
    CHECK(memarea_mpi_window_destroy(win) == MEMAREA_SUCCESS);
    CHECK(memarea_mpi_window_create(&win, MPI_COMM_WORLD, rank == 0 ? 0 : 1000, pooled, NULL) ==
          MEMAREA_ERROR_INVALID_VALUE);
    CHECK(memarea_mpi_last_failure(&kind, &failed_rank) == MEMAREA_SUCCESS);
    CHECK(kind == MEMAREA_MPI_FAILURE_RANK && failed_rank == 0);
    CHECK(strstr(memarea_last_error_message(), "rank 0 (node rank 0)") != NULL);
    CHECK(memarea_pool_destroy(pool) == MEMAREA_SUCCESS); /* nothing of the pool stayed live */
    CHECK(memarea_area_destroy(pooled) == MEMAREA_SUCCESS);
    CHECK(memarea_area_destroy(dev) == MEMAREA_SUCCESS);
  }

  /* share(): one device buffer per rank. */
  CHECK(memarea_area_create(&area, -1, 0) == MEMAREA_SUCCESS);
  CHECK(memarea_area_mmap(area, &buf, 5000, NULL) == MEMAREA_SUCCESS);
  fill(host, 5000, (unsigned)rank + 100u);
  CHECK(memarea_memcpy(buf, host, 5000) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_share(&shared, MPI_COMM_WORLD, buf, NULL) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_shared_node_rank(shared, &node_rank, &node_size) == MEMAREA_SUCCESS);
  for (r = 0; r < node_size; ++r) {
    CHECK(memarea_mpi_shared_get(shared, r, &remote, &size) == MEMAREA_SUCCESS);
    CHECK(size == 5000);
    CHECK(memarea_memcpy(host, remote, 5000) == MEMAREA_SUCCESS);
    fill(expect, 5000, (unsigned)r + 100u); /* one node: node rank r is world rank r */
    CHECK(memcmp(host, expect, 5000) == 0);
    CHECK(memarea_mpi_shared_can_access(shared, r, &can) == MEMAREA_SUCCESS);
  }
  CHECK(memarea_mpi_shared_get(shared, -1, &remote, NULL) == MEMAREA_ERROR_INVALID_VALUE);
  CHECK(memarea_mpi_shared_close(shared) == MEMAREA_SUCCESS);
  CHECK(memarea_area_munmap(area, buf, 5000) == MEMAREA_SUCCESS);
  CHECK(memarea_area_destroy(area) == MEMAREA_SUCCESS);
  CHECK(memarea_mpi_share(&shared, MPI_COMM_WORLD, NULL, NULL) == MEMAREA_ERROR_INVALID_VALUE);
  CHECK(memarea_mpi_last_failure(&kind, NULL) == MEMAREA_SUCCESS && kind == MEMAREA_MPI_FAILURE_RANK);

  write_verdict();
  free(host);
  free(expect);
  MPI_Finalize();
  return failures ? 1 : 0;
}
