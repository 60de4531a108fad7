// libFuzzer harness: what a peer sends to receive_fd over a Unix socket. The input is split into
// the first message (with a descriptor attached when its first byte is odd) and more bytes; the
// peer end is then shut down. receive_fd must return a descriptor or a memarea status, never
// crash, block (the peer closed) or leak a descriptor.
#include <memarea/error.hpp>
#include <memarea/ipc.hpp>

#include <dirent.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  const int before = open_fds();
  const std::size_t first = std::min<std::size_t>(data[1], size - 2);
  const std::uint8_t* body = data + 2;
  if (first > 0) {
    iovec iov{const_cast<std::uint8_t*>(body), first};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    const int count = (data[0] & 1) + ((data[0] & 2) >> 1);  // 0, 1 or 2 descriptors
    if (count > 0) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * count);
      int fds[2] = {sv[0], sv[0]};
      std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
    }
    (void)sendmsg(sv[0], &msg, MSG_NOSIGNAL);
  }
  if (size - 2 > first) (void)send(sv[0], body + first, size - 2 - first, MSG_NOSIGNAL);
  shutdown(sv[0], SHUT_WR);
  std::vector<unsigned char> payload(data[0] & 4 ? 16 : 65536);
  try {
    std::size_t got = 0;
    const int fd = memarea::ipc::receive_fd(sv[1], payload.data(), payload.size(), &got, 1000);
    if (got > payload.size()) std::abort();
    close(fd);
  } catch (const memarea::error&) {
  }
  close(sv[0]);
  close(sv[1]);
  if (open_fds() != before - 2) std::abort();  // a received descriptor leaked
  return 0;
}
