// Tracking of live allocations (tracking.hpp): records in shards by address, each behind a
// ranked mutex, so that threads allocating different memory rarely meet and fork() never
// copies a shard mid-change (its prepare takes every shard's lock).
#include "core/memory/tracking.hpp"

#include "base/fork_safety.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <fmt/format.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace memarea::detail::tracking {

namespace {

constexpr int kShards = 32;

struct shard {
  ranked_mutex mutex{lock_rank::tracking};
  std::unordered_map<std::uintptr_t, entry> live;
};

struct table {
  shard shards[kShards];
};

table& records() {
  return made_once([] { return new table; });
}

shard& shard_of(const void* p) {
  // Allocations are aligned: the low bits say nothing.
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return records().shards[((a >> 8) ^ (a >> 20)) % kShards];
}

std::atomic<std::int64_t> g_since{0};

/// MEMAREA_TRACK, read when memarea is loaded: "1" on, unset, empty or "0" off; anything
/// else is refused with a warning (and tracking stays off).
bool from_environment() {
  const char* v = std::getenv("MEMAREA_TRACK");
  if (!v || !*v || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  std::fprintf(stderr,
               "memarea: warning: MEMAREA_TRACK=%s is neither 0 nor 1; allocation tracking "
               "stays off\n",
               v);
  return false;
}

/// MEMAREA_TRACK_DEPTH, read when memarea is loaded: frames a stack keeps, 1 to kFrames; 0
/// (unset, empty, or refused with a warning) leaves it to the walker (stack_walker()).
int depth_from_environment() {
  const char* v = std::getenv("MEMAREA_TRACK_DEPTH");
  if (!v || !*v) return 0;
  char* end = nullptr;
  errno = 0;
  const long d = std::strtol(v, &end, 10);
  if (errno == 0 && end && *end == '\0' && d >= 1 && d <= kFrames) return static_cast<int>(d);
  std::fprintf(stderr,
               "memarea: warning: MEMAREA_TRACK_DEPTH=%s is not a number of frames from 1 to "
               "%d; stacks keep the default\n",
               v, kFrames);
  return 0;
}

const int g_depth_asked = depth_from_environment();

using walk_fn = int (*)(void**, int);

/// How stacks are taken, chosen when tracking is first turned on: libunwind's unw_backtrace
/// where libunwind.so.8 loads (it caches what it learns of each function, which glibc's
/// walker looks up anew on every walk), else glibc's backtrace(). Loaded RTLD_LOCAL, so that its _Unwind_*
/// never stand in for libgcc's under the program's exceptions.
struct walker {
  walk_fn walk = nullptr;
  const char* name = "";
  int depth = 0;
};

// Builds with a sanitizer keep to glibc's walker (tracking.hpp says why).
#ifdef MEMAREA_TRACK_UNDER_SANITIZER
#define MEMAREA_TRACK_WITH_LIBUNWIND 0
#else
#define MEMAREA_TRACK_WITH_LIBUNWIND 1
#endif

const walker& stack_walker_now() {
  static const walker w = [] {
    walker out;
    void* lib = MEMAREA_TRACK_WITH_LIBUNWIND ? dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL)
                                             : nullptr;
    if (lib) {
      if (void* f = dlsym(lib, "unw_backtrace")) {
        out.walk = reinterpret_cast<walk_fn>(f);
        out.name = "libunwind";
        out.depth = g_depth_asked ? g_depth_asked : kDefaultDepthLibunwind;
        return out;
      }
      dlclose(lib);
    }
    out.walk = &backtrace;
    out.name = "backtrace";
    out.depth = g_depth_asked ? g_depth_asked : kDefaultDepth;
    return out;
  }();
  return w;
}

/// The walker once chosen (set(true) chooses it before any record is made).
std::atomic<const walker*> g_walker{nullptr};

[[maybe_unused]] const bool g_environment_read = [] {
  if (from_environment()) set(true);
  return true;
}();

}  // namespace

std::int64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void remember(const void* ptr, std::size_t size, memarea_memory_kind kind, int device,
              const void* pool, const void* stream, bool piece) noexcept {
  if (!ptr) return;
  entry e;
  e.ptr = ptr;
  e.size = size;
  e.kind = kind;
  e.device = device;
  e.pool = pool;
  e.stream = stream;
  e.piece = piece;
  e.born_ns = now_ns();
  // The kernel's id of the thread, asked once per thread: the system call costs as much as a
  // tenth of the budget.
  thread_local const std::uint64_t tid = static_cast<std::uint64_t>(syscall(SYS_gettid));
  e.thread = tid;
  const walker* w = g_walker.load(std::memory_order_acquire);
  e.depth = w ? w->walk(e.frames, w->depth) : 0;
  shard& s = shard_of(ptr);
  try {
    std::lock_guard lock(s.mutex);
    // Rechecked under the lock: set(false) clears the shards under theirs, and a record made
    // after would outlive the switch.
    if (!g_on.load(std::memory_order_relaxed)) return;
    s.live[reinterpret_cast<std::uintptr_t>(ptr)] = e;
  } catch (...) {
    // Out of host memory: the allocation goes untracked rather than failing.
  }
}

void forget(const void* ptr) noexcept {
  if (!ptr) return;
  shard& s = shard_of(ptr);
  std::lock_guard lock(s.mutex);
  s.live.erase(reinterpret_cast<std::uintptr_t>(ptr));
}

void forget_pieces_of(const void* pool) noexcept {
  if (!g_on.load(std::memory_order_relaxed) || !pool) return;
  for (shard& s : records().shards) {
    std::lock_guard lock(s.mutex);
    std::erase_if(s.live, [&](const auto& kv) { return kv.second.piece && kv.second.pool == pool; });
  }
}

void set(bool on) {
  if (on) {
    // The walker is chosen and its first walk (which loads and sets up the unwinder: dlopen,
    // malloc) made here, not on an allocation path and never while a shard's lock is held.
    const walker& w = stack_walker_now();
    void* warm[2];
    (void)w.walk(warm, 2);
    g_walker.store(&w, std::memory_order_release);
    if (!g_on.load(std::memory_order_relaxed)) g_since.store(now_ns(), std::memory_order_relaxed);
    g_on.store(true, std::memory_order_relaxed);
    return;
  }
  g_on.store(false, std::memory_order_relaxed);
  for (shard& s : records().shards) {
    std::unordered_map<std::uintptr_t, entry> dropped;
    {
      std::lock_guard lock(s.mutex);
      dropped.swap(s.live);
    }
  }
}

const char* stack_walker_name() { return stack_walker_now().name; }

int stack_depth() { return stack_walker_now().depth; }

bool enabled() { return g_on.load(std::memory_order_relaxed); }

std::int64_t since_ns() noexcept { return g_since.load(std::memory_order_relaxed); }

std::vector<entry> all() {
  std::vector<entry> out;
  for (shard& s : records().shards) {
    std::lock_guard lock(s.mutex);
    for (const auto& [_, e] : s.live) out.push_back(e);
  }
  return out;
}

std::vector<std::string> symbolise(const entry& e) {
  std::vector<std::string> out;
  for (int i = 0; i < e.depth; ++i) {
    Dl_info info{};
    if (!dladdr(e.frames[i], &info) || !info.dli_sname) {
      out.push_back(info.dli_fname ? fmt::format("? ({})", info.dli_fname) : "?");
      continue;
    }
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> name(
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), std::free);
    const auto off = reinterpret_cast<std::uintptr_t>(e.frames[i]) -
                     reinterpret_cast<std::uintptr_t>(info.dli_saddr);
    out.push_back(fmt::format("{}+{:#x} ({})", status == 0 ? name.get() : info.dli_sname, off,
                              info.dli_fname ? info.dli_fname : "?"));
  }
  return out;
}

}  // namespace memarea::detail::tracking
