// Shareable memory named by a POSIX file descriptor (CUDA VMM; memfd on sim) and passing
// descriptors over Unix sockets (SCM_RIGHTS), as NCCL does for memory legacy IPC cannot share.
#include "core/ipc/ipc_impl.hpp"
#include "core/ipc/ipc_observer.hpp"
#include "core/memory/registry.hpp"
#include "core/system.hpp"

#include <memarea/ipc.hpp>

#include <fmt/format.h>

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <mutex>

namespace memarea::ipc {
namespace {
using namespace detail;
using namespace detail::ipc_internal;

constexpr std::size_t kMaxPayload = 65536;
/// How long the rest of a message may take once its first byte arrived (receive_fd without a
/// timeout).
constexpr std::chrono::milliseconds kRestOfMessage{5000};

/// Shareable allocations of this process, by mapped address; each also has a registry record
/// (for lookup and copies) whose id is kept here.
struct table {
  ranked_mutex m{lock_rank::shareables};
  std::map<void*, std::pair<shareable_allocation, std::uint64_t>> by_ptr;
};
table& shareables() {
  return made_once([] {
    static table t;
    return &t;
  });
}

int resolve_device(int device, const char* what) {
  auto& sys = system::get();
  if (device == -1) device = current_device();
  sys.check_device(device, what);
  return device;
}

shareable track(const shareable_allocation& a, bool imported) {
  observe_memory();  // only IPC's calls free this memory: the observer refuses other frees
  record r;
  r.base = a.ptr;
  r.size = a.size;
  r.requested = a.size;
  r.kind = imported ? MEMAREA_MEMORY_IPC_IMPORTED : MEMAREA_MEMORY_DEVICE;
  r.device = a.device;
  r.context_device = a.device;
  r.area_flags = kNoAreaFlags;
  r.area_device = imported ? kShareableImportedSentinel : kShareableSentinel;
  r.id = allocations().next_id();
  auto& t = shareables();
  try {
    std::lock_guard lock(t.m);
    t.by_ptr[a.ptr] = {a, r.id};
    allocations().insert(r);
  } catch (...) {
    std::lock_guard lock(t.m);
    t.by_ptr.erase(a.ptr);
    (void)system::get().gpu().shareable_release(a);
    throw;
  }
  return shareable{a.ptr, a.size, a.device};
}

error errno_error(errc code, const std::string& what, int e) {
  return error(code, fmt::format("{}: {}", what, std::strerror(e)));
}

}  // namespace

shareable create_shareable(std::size_t size, int device) {
  if (size == 0) throw error(errc::invalid_value, "create_shareable: size is 0");
  device = resolve_device(device, "create_shareable");
  shareable_allocation a;
  check(system::get().gpu().shareable_create(device, size, &a),
        [&] { return fmt::format("create_shareable of {} bytes on device {}", size, device); });
  return track(a, false);
}

int export_fd(const void* ptr) {
  if (!ptr) throw error(errc::invalid_value, "export_fd: pointer is NULL");
  shareable_allocation a;
  {
    auto& t = shareables();
    std::lock_guard lock(t.m);
    auto it = t.by_ptr.find(const_cast<void*>(ptr));
    if (it == t.by_ptr.end())
      throw error(errc::invalid_value,
                  fmt::format("export_fd: {} is not the start of shareable memory (made by "
                              "create_shareable or import_fd)",
                              ptr));
    a = it->second.first;
  }
  int fd = -1;
  check(system::get().gpu().shareable_export_fd(a, &fd), "export_fd");
  return fd;
}

shareable import_fd(int fd, std::size_t size, int device) {
  if (fd < 0) throw error(errc::invalid_value, fmt::format("import_fd: fd {} is negative", fd));
  if (size == 0) throw error(errc::invalid_value, "import_fd: size is 0");
  device = resolve_device(device, "import_fd");
  shareable_allocation a;
  check(system::get().gpu().shareable_import_fd(device, fd, size, &a),
        [&] { return fmt::format("import_fd of fd {} ({} bytes) on device {}", fd, size, device); });
  return track(a, true);
}

void release_shareable(void* ptr) {
  if (!ptr) throw error(errc::invalid_value, "release_shareable: pointer is NULL");
  auto& t = shareables();
  std::lock_guard lock(t.m);
  auto it = t.by_ptr.find(ptr);
  if (it == t.by_ptr.end())
    throw error(errc::invalid_value,
                fmt::format("release_shareable: {} is not the start of shareable memory", ptr));
  // The driver first: when it refuses, everything stays as it was.
  check(system::get().gpu().shareable_release(it->second.first), "release_shareable");
  const std::uint64_t id = it->second.second;
  allocations().erase_if(ptr, [id](const record& r) { return r.id == id; });
  t.by_ptr.erase(it);
}

void send_fd(int socket, int fd, const void* payload, std::size_t size) {
  if (socket < 0 || fd < 0)
    throw error(errc::invalid_value,
                fmt::format("send_fd: socket {} and fd {} must be descriptors", socket, fd));
  if (size > kMaxPayload)
    throw error(errc::invalid_value,
                fmt::format("send_fd: payload of {} bytes (at most {})", size, kMaxPayload));
  if (size && !payload) throw error(errc::invalid_value, "send_fd: payload is NULL");
  // A 4-byte length first: the descriptor rides on it, and stream sockets can find the end.
  std::uint32_t len = static_cast<std::uint32_t>(size);
  iovec iov[2];
  iov[0].iov_base = &len;
  iov[0].iov_len = sizeof len;
  iov[1].iov_base = const_cast<void*>(payload);
  iov[1].iov_len = size;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::memset(control, 0, sizeof control);
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = size ? 2 : 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    int e = errno;
    throw errno_error(e == EBADF || e == ENOTSOCK || e == EINVAL ? errc::invalid_value
                                                                  : errc::unknown,
                      "send_fd: sendmsg", e);
  }
  // The descriptor went with the first byte; the rest of a stream write may need more calls.
  std::size_t sent = static_cast<std::size_t>(n);
  const std::size_t total = sizeof len + size;
  while (sent < total) {
    const char* from = sent < sizeof len ? reinterpret_cast<const char*>(&len) + sent
                                         : static_cast<const char*>(payload) + (sent - sizeof len);
    std::size_t chunk = sent < sizeof len ? sizeof len - sent : total - sent;
    ssize_t m = send(socket, from, chunk, MSG_NOSIGNAL);
    if (m < 0 && errno == EINTR) continue;
    if (m < 0) throw errno_error(errc::unknown, "send_fd: send", errno);
    sent += static_cast<std::size_t>(m);
  }
}

namespace {
using receive_clock = std::chrono::steady_clock;

/// Waits until socket has something to read or `until` passes; false on timeout. Errors of
/// poll itself are left to the recv that follows.
bool readable_by(int socket, receive_clock::time_point until) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - receive_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{socket, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), INT32_MAX)));
    if (r < 0 && errno == EINTR) continue;
    return r != 0;
  }
}
}  // namespace

int receive_fd(int socket, void* payload, std::size_t capacity, std::size_t* size,
               int timeout_ms) {
  if (socket < 0)
    throw error(errc::invalid_value, fmt::format("receive_fd: socket {} is negative", socket));
  if (capacity && !payload) throw error(errc::invalid_value, "receive_fd: payload is NULL");
  // The whole message within timeout_ms; without one, the first byte may take any time but the
  // rest must follow within kRestOfMessage, so a peer that stops half-way cannot block us.
  const auto start = receive_clock::now();
  const bool bounded = timeout_ms >= 0;
  const auto deadline = start + std::chrono::milliseconds(bounded ? timeout_ms : 0);
  if (bounded && !readable_by(socket, deadline))
    throw error(errc::not_found,
                fmt::format("receive_fd: no message arrived within {} ms", timeout_ms));
  std::uint32_t len = 0;
  std::vector<char> body(kMaxPayload);
  iovec iov[2];
  iov[0].iov_base = &len;
  iov[0].iov_len = sizeof len;
  iov[1].iov_base = body.data();
  iov[1].iov_len = body.size();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    int e = errno;
    throw errno_error(e == EBADF || e == ENOTSOCK || e == EINVAL ? errc::invalid_value
                                                                  : errc::unknown,
                      "receive_fd: recvmsg", e);
  }
  // Every descriptor that arrived is ours to close unless it is the one handed out.
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int f;
      std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
      fds.push_back(f);
    }
  }
  auto fail = [&](errc code, const std::string& why) {
    for (int f : fds) ::close(f);
    return error(code, "receive_fd: " + why);
  };
  if (n == 0) throw fail(errc::not_found, "the peer closed the socket");
  if (fds.size() != 1)
    throw fail(errc::invalid_value, fmt::format("{} descriptors arrived, not 1", fds.size()));
  if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) throw fail(errc::invalid_value, "message truncated");
  std::size_t got = static_cast<std::size_t>(n);
  const auto rest_by = bounded ? deadline : receive_clock::now() + kRestOfMessage;
  while (got < sizeof len || got < sizeof len + len) {
    if (got >= sizeof len && len > kMaxPayload)
      throw fail(errc::invalid_value, fmt::format("payload length {} is too large", len));
    char* to = got < sizeof len ? reinterpret_cast<char*>(&len) + got
                                : body.data() + (got - sizeof len);
    std::size_t want = got < sizeof len ? sizeof len - got : sizeof len + len - got;
    if (!readable_by(socket, rest_by))
      throw fail(errc::invalid_value,
                 fmt::format("the message did not arrive whole within {} ms ({} of {} bytes)",
                             bounded ? timeout_ms : static_cast<int>(kRestOfMessage.count()),
                             got, got < sizeof len ? sizeof len : sizeof len + len));
    ssize_t m = recv(socket, to, want, 0);
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) throw fail(errc::invalid_value, "the message ended early");
    got += static_cast<std::size_t>(m);
  }
  if (len > kMaxPayload) throw fail(errc::invalid_value, "payload length too large");
  if (len > capacity)
    throw fail(errc::invalid_value,
               fmt::format("the payload has {} bytes, the buffer {}", len, capacity));
  if (len) std::memcpy(payload, body.data(), len);
  if (size) *size = len;
  return fds[0];
}

}  // namespace memarea::ipc
