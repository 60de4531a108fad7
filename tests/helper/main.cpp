// memarea_test_helper: the other process of the multi-process tests. It inherits the test's
// environment (so the same backend and sim settings) and talks over argv, stdin and stdout.
//
//   check HEX N SEED OFF WSEED   open HEX; its first N-OFF bytes must be pattern(SEED, N)[OFF..];
//                                then write pattern(WSEED, N-OFF) there unless WSEED is 0; close
//   expect HEX STATUS            open HEX must fail with STATUS (e.g. MEMAREA_ERROR_INVALID_HANDLE)
//   hold HEX N SEED              open HEX, check it, print "opened", then obey stdin:
//                                  "check SEED" -> "ok"/"bad", "close" -> "closed" (or a
//                                  status), "reopen" -> open HEX again and close it:
//                                  "reopened" or a status, "owner" -> its lease; EOF: exit
//   export N SEED                allocate N bytes of device memory filled with pattern(SEED),
//                                print its handle, then obey stdin:
//                                  "check SEED" -> "ok"/"bad"; "free" -> "freed" or a status;
//                                  "alloc N SEED" -> the new buffer's handle (the old is freed
//                                  first unless already); "interior OFF" -> handle of ptr+OFF;
//                                  "importers" -> the count; "another N SEED" -> the handle
//                                  of a second live buffer (pattern(SEED, N)); "owner" -> its
//                                  lease (16 hex digits); "abort" -> abort(); "exit-now" ->
//                                  _exit(0) without cleaning up; EOF: exit
//   recv-fd SOCK N SEED WSEED    receive an fd over socket SOCK, import N bytes, check SEED,
//                                write WSEED, release, exit
//   import-all N SEED HEX...     open each handle; the i-th (from 0) must hold pattern(SEED+i,
//                                N); write pattern(SEED+1000+i, N) there; print "ok opens=K
//                                mappings=M" (K: driver opens, M: driver mappings open now),
//                                then obey stdin: "close" -> close them all, "closed"; EOF: exit
//   importer                     obey stdin: "open HEX" -> "ok opens=K" (K: driver opens so
//                                far; the pointer stays open) or a status; "close-all" ->
//                                close every pointer, "closed"; "lookup OFF" -> lookup of the
//                                last opened pointer + OFF: "at=A size=S capacity=C device=D
//                                kind=K" (A: the pointer's offset from the base it reports);
//                                EOF: exit
//   share N                      allocate N bytes of device memory on device 0, print its handle,
//                                then obey stdin: "open HEX" -> "ok" (kept open until EOF) or a
//                                status; "owner" -> its lease; "usage" -> "live=L reserved=R
//                                exported=E imported=I" (memory_usage(0)); EOF: close, exit
//   lru HEX...                   open and close each handle in turn, then print
//                                "limit=L cached=FLAGS": L the import cache's bound, FLAGS a 1
//                                per argument whose mapping is still cached, else 0; a memarea
//                                error prints "STATUS message" (exit 2)
//   free-shareable N SEED        shareable memory of N bytes on device 0 holding pattern(SEED),
//                                exported as a descriptor, in a process that made no IPC call
//                                before: prints "at P" (P: its pointer), then for memarea_free,
//                                managed::free and host::free of it "STATUS message" (or
//                                "freed"), then "kind K" (its lookup), "holds ok"/"bad" (through
//                                its pointer), "imported ok"/"bad" (the descriptor imported again)
//                                and "released"; "MEMAREA_ERROR_NOT_SUPPORTED message" where
//                                there is no shareable memory
//   prepare                      makes no IPC call; obeys stdin: "state" -> "armed=A owner=O" (A:
//                                1 while the first device allocation's hook is armed, O: this
//                                process's lease, 0 before it has one); "host" -> allocate
//                                pinned host memory, then as "state"; "device" -> allocate
//                                device memory, then as "state"; "fork" -> a child of fork()
//                                prints "child " and its state, allocates device memory, prints
//                                "child " and its state again, then "child owner=O" once it has
//                                a lease, and lives until "end" -> "ended S" (its exit status)
// Exit status: 0 success, 2 memarea error (status name printed), 3 data mismatch, 4/5 wrong
// outcome of expect, 64 usage.
#include "base/housekeeper.hpp"
#include "base/lease.hpp"
#include "core/ipc/ipc_wire.hpp"
#include "core/memory/memory_observer.hpp"
#include "testing/memarea_testing.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/host.hpp>
#include <memarea/ipc.hpp>
#include <memarea/managed.hpp>
#include <memarea/memarea.h>
#include <memarea/pointer.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// The bytes the tests expect: a function of (seed, n), never all zeros.
std::vector<unsigned char> pattern(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  if (n) v[0] |= 1;
  return v;
}

bool matches(const void* dev, const unsigned char* expected, std::size_t n) {
  std::vector<unsigned char> got(n, 0);
  memarea::copy(got.data(), dev, n);
  return std::memcmp(got.data(), expected, n) == 0;
}

void say(const std::string& line) {
  std::cout << line << std::endl;  // flushes: the test waits for each line
}

std::uint64_t num(const char* s) { return std::strtoull(s, nullptr, 0); }

std::string hex64(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

int check(int argc, char** argv) {
  if (argc != 7 && argc != 8) return 64;
  auto h = memarea::ipc::handle::from_hex(argv[2]);
  const std::size_t n = num(argv[3]), off = num(argv[5]);
  const std::uint64_t seed = num(argv[4]), wseed = num(argv[6]);
  // Optional: the device to open on (default: the memory's own).
  const int device = argc == 8 ? static_cast<int>(std::strtol(argv[7], nullptr, 10)) : -1;
  memarea::ipc::mapping m(h, device, memarea::ipc::lazy_enable_peer_access);
  auto expected = pattern(seed, n);
  if (!matches(m.data(), expected.data() + off, n - off)) {
    say("bad");
    return 3;
  }
  if (wseed) {
    auto w = pattern(wseed, n - off);
    memarea::copy(m.data(), w.data(), w.size());
  }
  say("ok");
  return 0;
}

int expect(int argc, char** argv) {
  if (argc != 4) return 64;
  auto h = memarea::ipc::handle::from_hex(argv[2]);
  try {
    void* p = memarea::ipc::open(h);
    memarea::ipc::close(p);
    say("opened");
    return 4;
  } catch (const memarea::error& e) {
    say(memarea::to_string(e.status()));
    return std::string(memarea::to_string(e.status())) == argv[3] ? 0 : 5;
  }
}

int hold(int argc, char** argv) {
  if (argc != 5) return 64;
  auto h = memarea::ipc::handle::from_hex(argv[2]);
  const std::size_t n = num(argv[3]);
  void* p = memarea::ipc::open(h, -1, memarea::ipc::lazy_enable_peer_access);
  if (!matches(p, pattern(num(argv[4]), n).data(), n)) {
    say("bad");
    return 3;
  }
  say("opened");
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    if (cmd == "check") {
      std::uint64_t seed = 0;
      in >> seed;
      try {
        say(matches(p, pattern(seed, n).data(), n) ? "ok" : "bad");
      } catch (const memarea::error& e) {
        say(memarea::to_string(e.status()));
      }
    } else if (cmd == "close") {
      try {
        memarea::ipc::close(p);
        say("closed");
      } catch (const memarea::error& e) {
        say(memarea::to_string(e.status()));
      }
    } else if (cmd == "reopen") {
      try {
        memarea::ipc::close(memarea::ipc::open(h));
        say("reopened");
      } catch (const memarea::error& e) {
        say(memarea::to_string(e.status()));
      }
    } else if (cmd == "owner") {
      say(hex64(memarea::detail::lease::current()));
    }
  }
  return 0;
}

int export_loop(int argc, char** argv) {
  if (argc != 4) return 64;
  std::size_t n = num(argv[2]);
  const memarea::area a(0);
  void* p = a.mmap(n);
  auto fill = [&](std::uint64_t seed) {
    auto v = pattern(seed, n);
    memarea::copy(p, v.data(), n);
  };
  fill(num(argv[3]));
  std::vector<std::pair<void*, std::size_t>> others;
  say(memarea::ipc::export_handle(p).to_hex());
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "check") {
        std::uint64_t seed = 0;
        in >> seed;
        say(matches(p, pattern(seed, n).data(), n) ? "ok" : "bad");
      } else if (cmd == "free") {
        a.munmap(p, n);
        p = nullptr;
        say("freed");
      } else if (cmd == "alloc") {
        std::uint64_t seed = 0;
        std::size_t m = 0;
        in >> m >> seed;
        if (p) a.munmap(p, n);
        n = m;
        p = a.mmap(n);
        fill(seed);
        say(memarea::ipc::export_handle(p).to_hex());
      } else if (cmd == "interior") {
        std::size_t off = 0;
        in >> off;
        say(memarea::ipc::export_handle(static_cast<char*>(p) + off).to_hex());
      } else if (cmd == "importers") {
        say(std::to_string(memarea::ipc::importers(p)));
      } else if (cmd == "owner") {
        say(hex64(memarea::detail::lease::current()));
      } else if (cmd == "abort") {
        std::abort();
      } else if (cmd == "exit-now") {
        std::fflush(nullptr);
        _exit(0);
      } else if (cmd == "another") {
        // A second live buffer beside the first (freed at exit): its handle.
        std::uint64_t seed = 0;
        std::size_t m = 0;
        in >> m >> seed;
        void* q = a.mmap(m);
        others.emplace_back(q, m);
        auto v = pattern(seed, m);
        memarea::copy(q, v.data(), m);
        say(memarea::ipc::export_handle(q).to_hex());
      }
    } catch (const memarea::error& e) {
      say(memarea::to_string(e.status()));
    }
  }
  if (p) a.munmap(p, n);
  for (auto [q, m] : others) a.munmap(q, m);
  return 0;
}

int recv_fd(int argc, char** argv) {
  if (argc != 6) return 64;
  const int sock = static_cast<int>(num(argv[2]));
  const std::size_t n = num(argv[3]);
  std::uint64_t size = 0;
  std::size_t got = 0;
  int fd = memarea::ipc::receive_fd(sock, &size, sizeof size, &got);
  if (got != sizeof size) return 3;
  auto m = memarea::ipc::import_fd(fd, size);
  ::close(fd);
  if (!matches(m.ptr, pattern(num(argv[4]), n).data(), n)) {
    say("bad");
    return 3;
  }
  auto w = pattern(num(argv[5]), n);
  memarea::copy(m.ptr, w.data(), n);
  memarea::ipc::release_shareable(m.ptr);
  say("ok");
  return 0;
}

int import_all(int argc, char** argv) {
  if (argc < 5) return 64;
  const std::size_t n = num(argv[2]);
  const std::uint64_t seed = num(argv[3]);
  std::vector<void*> opened;
  for (int i = 4; i < argc; ++i) {
    const std::uint64_t k = static_cast<std::uint64_t>(i - 4);
    void* p = memarea::ipc::open(memarea::ipc::handle::from_hex(argv[i]));
    opened.push_back(p);
    if (!matches(p, pattern(seed + k, n).data(), n)) {
      say("bad " + std::to_string(k));
      return 3;
    }
    auto w = pattern(seed + 1000 + k, n);
    memarea::copy(p, w.data(), n);
  }
  say("ok opens=" + std::to_string(memarea::ipc::driver_opens()) +
      " mappings=" + std::to_string(memarea::detail::testing::driver_mappings()));
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "close") {
      for (void* p : opened) memarea::ipc::close(p);
      opened.clear();
      say("closed");
    }
  }
  return 0;
}

int importer(int argc, char**) {
  if (argc != 2) return 64;
  std::vector<void*> opened;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd, hex;
    in >> cmd >> hex;
    if (cmd == "open") {
      try {
        opened.push_back(memarea::ipc::open(memarea::ipc::handle::from_hex(hex)));
        say("ok opens=" + std::to_string(memarea::ipc::driver_opens()));
      } catch (const memarea::error& e) {
        say(memarea::to_string(e.status()));
      }
    } else if (cmd == "close-all") {
      for (void* p : opened) memarea::ipc::close(p);
      opened.clear();
      say("closed");
    } else if (cmd == "lookup" && !opened.empty()) {
      const char* p = static_cast<const char*>(opened.back()) + std::stoull(hex);
      try {
        const memarea::allocation_info i = memarea::lookup(p);
        say("at=" + std::to_string(p - static_cast<const char*>(i.base)) +
            " size=" + std::to_string(i.size) + " capacity=" + std::to_string(i.capacity) +
            " device=" + std::to_string(i.device) + " kind=" + memarea::to_string(i.kind));
      } catch (const memarea::error& e) {
        say(memarea::to_string(e.status()));
      }
    }
  }
  return 0;
}

int lru(int argc, char** argv) {
  if (argc < 3) return 64;
  try {
    std::vector<memarea::ipc::handle> hs;
    for (int i = 2; i < argc; ++i) hs.push_back(memarea::ipc::handle::from_hex(argv[i]));
    for (const auto& h : hs) memarea::ipc::close(memarea::ipc::open(h));
    const auto cached = memarea::detail::testing::cached_mapping_keys();
    std::string flags;
    for (const auto& h : hs) {
      const auto w = memarea::detail::ipc_internal::parse(h);
      const bool in = std::find(cached.begin(), cached.end(),
                                std::make_pair(w.pid, w.buffer_id)) != cached.end();
      flags += in ? '1' : '0';
    }
    say("limit=" + std::to_string(memarea::ipc::cache_limit()) + " cached=" + flags);
    return 0;
  } catch (const memarea::error& e) {
    say(std::string(memarea::to_string(e.status())) + " " + e.what());
    return 2;
  }
}

/// overlap HEX...: starts the background thread, then for each handle waits until that thread
/// is idle and imports it (a first import each, from its own exporter); prints
/// "overlapped=N tried=M": how many took the overlapped path (ipc_importer.hpp).
int overlap(int argc, char** argv) {
  if (argc < 3) return 64;
  namespace hk = memarea::detail::housekeeper;
  try {
    hk::start();
    const std::size_t before = memarea::detail::testing::overlapped_first_opens();
    for (int i = 2; i < argc; ++i) {
      for (int spin = 0; spin < 100000 && !hk::idle(); ++spin) ::usleep(100);
      memarea::ipc::close(memarea::ipc::open(memarea::ipc::handle::from_hex(argv[i])));
    }
    say("overlapped=" +
        std::to_string(memarea::detail::testing::overlapped_first_opens() - before) +
        " tried=" + std::to_string(argc - 2));
    return 0;
  } catch (const memarea::error& e) {
    say(std::string(memarea::to_string(e.status())) + " " + e.what());
    return 2;
  }
}

int free_shareable(int argc, char** argv) {
  if (argc != 4) return 64;
  const std::size_t n = num(argv[2]);
  const auto expected = pattern(num(argv[3]), n);
  void* p = nullptr;
  std::size_t allocated = 0;
  const memarea_status made = memarea_shareable_create(&p, &allocated, n, 0);
  if (made != MEMAREA_SUCCESS) {
    say(std::string(memarea_status_name(made)) + " " + memarea_last_error_message());
    return made == MEMAREA_ERROR_NOT_SUPPORTED ? 0 : 2;
  }
  char at[32];
  std::snprintf(at, sizeof at, "%p", p);
  say(std::string("at ") + at);
  memarea::copy(p, expected.data(), n);
  int fd = -1;
  if (memarea_shareable_export_fd(&fd, p) != MEMAREA_SUCCESS) {
    say(std::string("export_fd: ") + memarea_last_error_message());
    return 2;
  }
  const memarea_status freed = memarea_free(p);
  say(freed == MEMAREA_SUCCESS
          ? std::string("freed")
          : std::string(memarea_status_name(freed)) + " " + memarea_last_error_message());
  for (void (*free_by_pointer)(void*) : {&memarea::managed::free, &memarea::host::free}) {
    try {
      free_by_pointer(p);
      say("freed");
    } catch (const memarea::error& e) {
      say(std::string(memarea::to_string(e.status())) + " " + e.message());
    }
  }
  say(std::string("kind ") + memarea::to_string(memarea::lookup(p).kind));
  say(matches(p, expected.data(), n) ? "holds ok" : "holds bad");
  void* q = nullptr;
  if (memarea_shareable_import_fd(&q, fd, allocated, 0) != MEMAREA_SUCCESS) {
    say(std::string("import_fd: ") + memarea_last_error_message());
    return 2;
  }
  ::close(fd);
  say(matches(q, expected.data(), n) ? "imported ok" : "imported bad");
  const bool released = memarea_shareable_release(q) == MEMAREA_SUCCESS &&
                        memarea_shareable_release(p) == MEMAREA_SUCCESS;
  say(released ? "released" : std::string("release: ") + memarea_last_error_message());
  return released ? 0 : 2;
}

/// "armed=A owner=O" (see prepare).
std::string prepare_state() {
  const bool armed =
      memarea::detail::memory_events::first_device_allocation.load() != nullptr;
  return std::string("armed=") + (armed ? "1" : "0") +
         " owner=" + hex64(memarea::detail::lease::current());
}

int prepare(int argc, char**) {
  if (argc != 2) return 64;
  constexpr std::size_t n = 4096;
  const memarea::area device(0);
  const memarea::area pinned(0, memarea::area_flags::host);
  std::vector<std::pair<const memarea::area*, void*>> made;  // given back at the end
  pid_t kid = -1;
  int kid_go = -1;  // the child lives until this closes
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "state") {
      say(prepare_state());
    } else if (line == "host") {
      made.emplace_back(&pinned, pinned.mmap(n));
      say(prepare_state());
    } else if (line == "device") {
      made.emplace_back(&device, device.mmap(n));
      say(prepare_state());
    } else if (line == "fork" && kid < 0) {
      int go[2];
      if (::pipe2(go, O_CLOEXEC) != 0) return 2;
      std::cout.flush();
      std::fflush(nullptr);
      kid = ::fork();
      if (kid == 0) {
        ::close(go[1]);
        say("child " + prepare_state());
        void* p = device.mmap(n);
        say("child " + prepare_state());
        // Where device memory does not make the lease at once (as sim's does), the background
        // preparation makes it.
        for (int i = 0; i < 3000 && memarea::detail::lease::current() == 0; ++i) ::usleep(10000);
        say("child owner=" + hex64(memarea::detail::lease::current()));
        char c;
        while (::read(go[0], &c, 1) < 0 && errno == EINTR) {
        }
        device.munmap(p, n);
        std::cout.flush();
        ::_exit(0);
      }
      ::close(go[0]);
      if (kid < 0) return 2;
      kid_go = go[1];
    } else if (line == "end" && kid > 0) {
      ::close(kid_go);
      int st = 0;
      while (::waitpid(kid, &st, 0) < 0 && errno == EINTR) {
      }
      kid = -1;
      say("ended " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)));
    }
  }
  for (auto [a, p] : made) a->munmap(p, n);
  return 0;
}

}  // namespace

namespace memarea_helper {
int share(int argc, char** argv);  // share.cpp
}

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  const std::string cmd = argv[1];
  try {
    if (cmd == "check") return check(argc, argv);
    if (cmd == "expect") return expect(argc, argv);
    if (cmd == "hold") return hold(argc, argv);
    if (cmd == "export") return export_loop(argc, argv);
    if (cmd == "recv-fd") return recv_fd(argc, argv);
    if (cmd == "lru") return lru(argc, argv);
    if (cmd == "overlap") return overlap(argc, argv);
    if (cmd == "import-all") return import_all(argc, argv);
    if (cmd == "importer") return importer(argc, argv);
    if (cmd == "free-shareable") return free_shareable(argc, argv);
    if (cmd == "prepare") return prepare(argc, argv);
    if (cmd == "share") return memarea_helper::share(argc, argv);
  } catch (const memarea::error& e) {
    say(memarea::to_string(e.status()));
    std::cerr << "memarea_test_helper " << cmd << ": " << e.what() << "\n";
    return 2;
  }
  return 64;
}
