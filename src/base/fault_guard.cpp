#include "base/fault_guard.hpp"
#include "testing/memarea_testing.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <new>

namespace memarea::detail::fault_guard {

namespace {

// The table the handler reads: chunks of entries, allocated on demand and never freed, so that
// the handler can walk them without a lock while other threads watch and unwatch. No mutex
// either for watch/unwatch: a child of fork() must find nothing held.
constexpr std::size_t kChunk = 1024;
constexpr std::size_t kChunks = 1024;

struct entry {
  std::atomic<std::uintptr_t> begin{0};  ///< 0: not watching
  std::atomic<std::uintptr_t> end{0};
  std::atomic<std::uint32_t> used{0};    ///< claimed by a watch (set before begin, cleared after)
  std::atomic<std::uint32_t> hit{0};     ///< a fault was repaired inside it
};
struct chunk {
  entry e[kChunk];
};

/// The first chunk is static (zero pages, touched as entries are used): a process's first watch,
/// on an export's or an import's first call, allocates nothing.
constinit chunk g_first_chunk;
constinit std::atomic<chunk*> g_chunks[kChunks] = {&g_first_chunk};
constinit std::atomic<std::size_t> g_hint{0};
constinit std::atomic<std::size_t> g_watched{0};
/// 0: handler not installed; 1: a thread is installing it; 2: installed; 3: could not be.
constinit std::atomic<int> g_installed{0};
struct sigaction g_previous {};
/// Read once at install: sysconf is not async-signal-safe.
std::uintptr_t g_page = 4096;

entry* at_index(std::size_t i) noexcept {
  chunk* c = g_chunks[i / kChunk].load(std::memory_order_acquire);
  return c ? &c->e[i % kChunk] : nullptr;
}

/// Hands a SIGBUS that is not ours to the handler memarea replaced, as if it had never been
/// there: the default action kills the process (a fault re-raises on return; a sent signal is
/// raised again once this handler returns).
void pass_on(int sig, siginfo_t* info, void* context) noexcept {
  const struct sigaction& old = g_previous;
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction) {
    old.sa_sigaction(sig, info, context);
    return;
  }
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    old.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  if (info->si_code <= 0) raise(sig);  // sent, not a fault: it would not come back by itself
}

void on_sigbus(int sig, siginfo_t* info, void* context) noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  if (info->si_code > 0 && addr != 0) {
    for (std::size_t c = 0; c < kChunks; ++c) {
      chunk* ch = g_chunks[c].load(std::memory_order_acquire);
      if (!ch) continue;
      for (entry& e : ch->e) {
        const std::uintptr_t b = e.begin.load(std::memory_order_acquire);
        if (b == 0 || addr < b) continue;
        const std::uintptr_t end = e.end.load(std::memory_order_acquire);
        if (addr >= end) continue;
        // The file no longer backs this page: zero pages in its place from here to the range's
        // end (what lies beyond the fault is beyond the file's new end too).
        const std::uintptr_t page = addr & ~(g_page - 1);
        void* p = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (p == MAP_FAILED) break;
        e.hit.store(1, std::memory_order_release);
        return;
      }
    }
  }
  pass_on(sig, info, context);
}

bool install() noexcept {
  for (;;) {
    int state = g_installed.load(std::memory_order_acquire);
    if (state == 2) return true;
    if (state == 3) return false;
    if (state == 0 && g_installed.compare_exchange_strong(state, 1)) break;
    sched_yield();
  }
  if (const long page = sysconf(_SC_PAGESIZE); page > 0) g_page = static_cast<std::uintptr_t>(page);
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  const bool ok = sigaction(SIGBUS, &sa, &old) == 0;
  if (ok) g_previous = old;
  g_installed.store(ok ? 2 : 3, std::memory_order_release);
  return ok;
}

}  // namespace

int watch(void* p, std::size_t len) noexcept {
  if (!p || len == 0 || !install()) return -1;
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::size_t start = g_hint.load(std::memory_order_relaxed);
  for (std::size_t n = 0; n < kChunk * kChunks; ++n) {
    const std::size_t i = (start + n) % (kChunk * kChunks);
    entry* e = at_index(i);
    if (!e) {
      // Past the chunks made so far: make the next one (another thread may make it first).
      auto* fresh = new (std::nothrow) chunk;
      if (!fresh) return -1;
      chunk* expected = nullptr;
      if (!g_chunks[i / kChunk].compare_exchange_strong(expected, fresh)) delete fresh;
      e = at_index(i);
    }
    std::uint32_t free = 0;
    if (!e->used.compare_exchange_strong(free, 1)) continue;
    e->hit.store(0, std::memory_order_relaxed);
    e->end.store(begin + len, std::memory_order_relaxed);
    e->begin.store(begin, std::memory_order_release);
    g_hint.store(i + 1, std::memory_order_relaxed);
    g_watched.fetch_add(1, std::memory_order_relaxed);
    return static_cast<int>(i);
  }
  return -1;
}

void unwatch(int id) noexcept {
  if (id < 0) return;
  entry* e = at_index(static_cast<std::size_t>(id));
  if (!e) return;
  e->begin.store(0, std::memory_order_release);
  e->end.store(0, std::memory_order_relaxed);
  e->used.store(0, std::memory_order_release);
  g_hint.store(static_cast<std::size_t>(id), std::memory_order_relaxed);
  g_watched.fetch_sub(1, std::memory_order_relaxed);
}

bool damaged(int id) noexcept {
  if (id < 0) return false;
  entry* e = at_index(static_cast<std::size_t>(id));
  return e && e->hit.load(std::memory_order_acquire) != 0;
}

}  // namespace memarea::detail::fault_guard

namespace memarea::detail::testing {

std::size_t fault_guard_watched() noexcept {
  return fault_guard::g_watched.load(std::memory_order_relaxed);
}

}  // namespace memarea::detail::testing
