// Shareable memory imported from a file descriptor that is not memarea's: refused, and the
// registry holds nothing more. The rest of IPC's tests without other processes is
// api/ipc_test.cpp.
#include "whitebox/whitebox.hpp"

#include <memarea/ipc.hpp>
#include <memarea/memarea.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

using namespace memarea;
using namespace memarea::test;

// Issue 19, finding 6: import_fd mapped any file that was large enough, and an unsealed memfd
// could be shrunk by its sender after the import (the importer then died of SIGBUS).
TEST(Ipc, ImportFdTakesOnlyShareableMemory) {
  MEMAREA_REQUIRE_DEVICES(1);
  constexpr std::size_t n = 8192;
  // A regular file, a pipe and an unsealed memfd, each large enough: refused, nothing mapped.
  const std::size_t live = live_allocations();
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(ftruncate(fileno(file), n), 0);
  int pipefd[2];
  ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
  const int unsealed = memfd_create("not-memarea", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, n), 0);
  for (int fd : {fileno(file), pipefd[0], unsealed}) {
    void* p = nullptr;
    const memarea_status s = memarea_shareable_import_fd(&p, fd, n, 0);
    if (s == MEMAREA_ERROR_NOT_SUPPORTED) GTEST_SKIP() << "no shareable memory on this device";
    EXPECT_EQ(s, MEMAREA_ERROR_INVALID_VALUE) << "fd " << fd << ": " << memarea_last_error_message();
    EXPECT_EQ(p, nullptr);
  }
  EXPECT_EQ(live_allocations(), live);
  std::fclose(file);
  for (int f : {pipefd[0], pipefd[1], unsealed}) ::close(f);
  // What export_fd gives out cannot change size: its mapping can never be cut short.
  ipc::shareable a = ipc::create_shareable(n, 0);
  const int fd = ipc::export_fd(a.ptr);
  if (backend_name() == "sim") {
    EXPECT_NE(ftruncate(fd, 0), 0) << "a shareable memfd shrank";
    EXPECT_NE(ftruncate(fd, static_cast<off_t>(4 * a.size)), 0) << "a shareable memfd grew";
  }
  ipc::shareable b = ipc::import_fd(fd, a.size, 0);
  const auto want = random_bytes(n);
  copy(a.ptr, want.data(), n);
  std::vector<unsigned char> got(n, 0);
  copy(got.data(), b.ptr, n);
  EXPECT_EQ(got, want);
  ::close(fd);
  ipc::release_shareable(b.ptr);
  ipc::release_shareable(a.ptr);
}
