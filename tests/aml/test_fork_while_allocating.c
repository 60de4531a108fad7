/* fork() while another thread is inside an allocator call (the area path, which holds the
 * allocator's lock across its area's mmap): every child can still allocate and free. Skipped
 * under sanitizers, whose own allocators are not safe across fork() with threads running
 * (GCC 12's ASan; docs/ipc.md). */
#include <aml.h>
#include <aml/area/linux.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/buddy.h>
#include <signal.h>
#include <sys/wait.h>

#include "check.h"

static struct aml_allocator *g_alloc;
static volatile int g_stop;

static void *churn(void *arg) {
  (void)arg;
  while (!g_stop) {
    void *p[64];
    for (int i = 0; i < 64; i++) p[i] = aml_alloc(g_alloc, 64);
    for (int i = 0; i < 64; i++) aml_free(g_alloc, p[i]);
  }
  return NULL;
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  printf("test_fork_while_allocating: skipped under a sanitizer\n");
  return 0;
#endif
  /* Options: the linux area's own mmap, so the buddy allocator takes the area path. */
  struct aml_area_linux_mmap_options o = {NULL, MAP_PRIVATE | MAP_ANONYMOUS,
                                          PROT_READ | PROT_WRITE, -1, 0};
  REQUIRE(aml_allocator_buddy_create(&g_alloc, &aml_area_linux,
                                     (struct aml_area_mmap_options *)&o) == AML_SUCCESS);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, churn, NULL) == 0);
  int hung = 0, failed = 0;
  for (int n = 0; n < 200 && !hung; ++n) { /* one hung child is enough */
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      alarm(5); /* a child stuck on a lock held at fork() dies of SIGALRM */
      unsigned char *p = aml_alloc(g_alloc, 64);
      if (!p) _exit(2);
      memset(p, 0x3c, 64);
      _exit(p[63] == 0x3c && aml_free(g_alloc, p) == AML_SUCCESS ? 0 : 3);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) ++hung;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  g_stop = 1;
  pthread_join(t, NULL);
  CHECK_EQ(hung, 0);
  CHECK_EQ(failed, 0);
  CHECK_EQ(aml_allocator_buddy_destroy(&g_alloc), AML_SUCCESS);
  return check_report("test_fork_while_allocating");
}
