// Host memory on libnuma and the Linux memory-policy system calls. Every failing call returns a
// dstatus that carries the errno (native), its name (native_name) and strerror (detail) next to
// memarea's own code, so callers can tell "bad node" from "kernel refused".
#include "base/fresh_mmap.hpp"
#include "driver/host/host.hpp"

#include <fmt/format.h>

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>

namespace memarea::detail::host {

namespace {

/// move_pages() takes arrays of page pointers; batching bounds that memory for huge ranges.
constexpr size_t k_move_batch = 4096;

/// The errno's symbolic name ("EINVAL"); static storage as dstatus::native_name requires.
const char* errno_name(int err) noexcept {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* n = strerrorname_np(err)) return n;
#endif
  switch (err) {
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EFAULT: return "EFAULT";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    case EAGAIN: return "EAGAIN";
    case EIO: return "EIO";
    case ENODEV: return "ENODEV";
    case ENOENT: return "ENOENT";
    case ENOSYS: return "ENOSYS";
    case E2BIG: return "E2BIG";
    case ESRCH: return "ESRCH";
    default: return "UNKNOWN_ERRNO";
  }
}

/// The usual meaning of an errno from the memory syscalls. Calls whose errno means something
/// else (mincore/madvise's ENOMEM is "not mapped", not "out of memory") map it themselves.
errc errno_to_errc(int err) noexcept {
  switch (err) {
    case 0: return errc::unknown;  // a failure without errno must never read as success
    case EINVAL:
    case EFAULT:
    case E2BIG: return errc::invalid_value;
    case ENOMEM: return errc::out_of_memory;
    case EPERM:
    case EACCES: return errc::not_permitted;
    case EBUSY:
    case EAGAIN: return errc::busy;
    case ENODEV:
    case ENXIO: return errc::invalid_device;
    case ENOSYS:
    case EOPNOTSUPP: return errc::not_supported;
    default: return errc::unknown;
  }
}

/// A failure that came from the kernel: code, errno, its name and "what: strerror".
dstatus from_errno(errc code, int err, const std::string& what) {
  dstatus s;
  s.code = code;
  s.native = err;
  s.native_name = errno_name(err);
  s.detail = fmt::format("{}: {}", what, std::strerror(err));
  return s;
}

/// A failure memarea decided on before any system call (native stays 0, name empty).
dstatus refused(errc code, std::string message) {
  dstatus s;
  s.code = code;
  s.detail = std::move(message);
  return s;
}

/// [begin, end) of the pages covering [ptr, ptr+size); false when the end overflows.
bool page_range(const void* ptr, size_t size, uintptr_t* begin, uintptr_t* end) noexcept {
  const uintptr_t ps = page_size();
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (size > UINTPTR_MAX - p) return false;
  const uintptr_t last = p + size;
  if (last > UINTPTR_MAX - (ps - 1)) return false;
  *begin = p & ~(ps - 1);
  *end = (last + ps - 1) & ~(ps - 1);
  return true;
}

/// The invalid_device status for a node that is not on this host, naming the valid range.
dstatus bad_node(int node, const char* what) {
  const int max = numa_available() ? ::numa_max_node() : 0;
  return refused(errc::invalid_device,
                 fmt::format("{}: NUMA node {} does not exist on this host (nodes 0..{})", what,
                             node, max));
}

/// Refuses a range that is not entirely mapped, before anything acts on it. mincore() has no
/// side effects and fails with ENOMEM exactly when part of the range is unmapped; move_pages()
/// alone cannot tell an unmapped page from the shared zero page (both read -EFAULT).
dstatus check_mapped(uintptr_t begin, uintptr_t end, const char* what) {
  const size_t ps = page_size();
  unsigned char vec[256];
  for (uintptr_t a = begin; a < end;) {
    const size_t pages = std::min<size_t>((end - a) / ps, sizeof vec);
    if (::mincore(reinterpret_cast<void*>(a), pages * ps, vec) != 0) {
      const int err = errno;
      if (err == ENOMEM) {
        return from_errno(errc::invalid_value, err,
                          fmt::format("{}: range [{:#x}, {:#x}) is not entirely mapped", what,
                                      begin, end));
      }
      return from_errno(errno_to_errc(err), err, fmt::format("{}: mincore", what));
    }
    a += pages * ps;
  }
  return dstatus::success();
}

/// Whether an madvise() value discards or hides data: rounding the range out to pages would
/// then destroy the caller's neighbours that share the first or last page.
bool destructive_advice(int advice) noexcept {
  switch (advice) {
    case MADV_DONTNEED:
#ifdef MADV_FREE
    case MADV_FREE:
#endif
#ifdef MADV_REMOVE
    case MADV_REMOVE:
#endif
#ifdef MADV_WIPEONFORK
    case MADV_WIPEONFORK:
#endif
#ifdef MADV_DONTFORK
    case MADV_DONTFORK:
#endif
      return true;
    default:
      return false;
  }
}

constexpr size_t k_mask_word_bits = sizeof(unsigned long) * CHAR_BIT;

/// The optional flags the kernel ORs into a policy's mode (MPOL_F_STATIC_NODES,
/// MPOL_F_RELATIVE_NODES, MPOL_F_NUMA_BALANCING: <linux/mempolicy.h>, absent from numaif.h).
constexpr int k_mode_flags = (1 << 15) | (1 << 14) | (1 << 13);

#ifndef MPOL_PREFERRED_MANY
#define MPOL_PREFERRED_MANY 5  // Linux 5.15; numaif.h before libnuma 2.0.15 lacks the name
#endif

/// mbind(mode, flags) of [begin, begin+len) over `nodes` (ignored for MPOL_DEFAULT, which takes
/// no nodes). Trailing zero words are not passed: the kernel refuses a mask longer than its
/// own node count unless the extra bits are 0, and shorter is always fine. Returns the errno
/// (0 on success).
int mbind_mask(void* begin, size_t len, int mode, const node_mask& nodes, unsigned flags) {
  if (mode == MPOL_DEFAULT) {
    return ::mbind(begin, len, MPOL_DEFAULT, nullptr, 0, flags) == 0 ? 0 : errno;
  }
  size_t words = nodes.size();
  while (words > 0 && nodes[words - 1] == 0) --words;
  // The kernel reads maxnode-1 bits, hence the + 1 (as libnuma itself passes).
  const unsigned long maxnode = words * k_mask_word_bits + 1;
  return ::mbind(begin, len, mode, words ? nodes.data() : nullptr, maxnode, flags) == 0 ? 0
                                                                                        : errno;
}

/// mbind(mode) of [begin, begin+len) to the one node `node` (ignored for MPOL_DEFAULT). The
/// nodemask is built by hand because libnuma's bitmask allocator exits the process on OOM.
/// Returns the errno (0 on success).
int mbind_node(void* begin, size_t len, int mode, int node) {
  node_mask mask;
  if (mode != MPOL_DEFAULT) mask_add(mask, node);
  return mbind_mask(begin, len, mode, mask, 0);
}

/// The number of nodes in mask.
size_t mask_count(const node_mask& mask) noexcept {
  size_t n = 0;
  for (unsigned long w : mask) n += static_cast<size_t>(__builtin_popcountl(w));
  return n;
}

/// Applies `where` to [begin, begin+len) (both page-aligned): preferred over several nodes tries
/// MPOL_PREFERRED_MANY first and falls back to MPOL_PREFERRED (the lowest node of the set) on a
/// kernel that does not know it (EINVAL). Returns the errno (0 on success).
int apply_placement(void* begin, size_t len, const placement& where, unsigned flags) {
  switch (where.mode) {
    case policy::default_policy: return mbind_mask(begin, len, MPOL_DEFAULT, {}, flags);
    case policy::bind: return mbind_mask(begin, len, MPOL_BIND, where.nodes, flags);
    case policy::interleave: return mbind_mask(begin, len, MPOL_INTERLEAVE, where.nodes, flags);
    case policy::preferred:
      if (mask_count(where.nodes) > 1) {
        const int err = mbind_mask(begin, len, MPOL_PREFERRED_MANY, where.nodes, flags);
        if (err != EINVAL) return err;
      }
      return mbind_mask(begin, len, MPOL_PREFERRED, where.nodes, flags);
  }
  return EINVAL;
}

/// "{0,2,5}": a node set for messages.
std::string mask_text(const node_mask& mask) {
  std::string out = "{";
  for (size_t w = 0; w < mask.size(); ++w) {
    for (size_t b = 0; b < k_mask_word_bits; ++b) {
      if (!((mask[w] >> b) & 1UL)) continue;
      if (out.size() > 1) out += ',';
      out += std::to_string(w * k_mask_word_bits + b);
    }
  }
  return out + "}";
}

/// The words a node mask from the kernel needs: one bit per possible node (libnuma reads the
/// count from /proc/self/status, 1024 on most kernels) and one word to spare.
size_t kernel_mask_words() noexcept {
  const int possible = ::numa_num_possible_nodes();
  const size_t bits = possible > 0 ? static_cast<size_t>(possible) : k_mask_word_bits;
  return (bits + k_mask_word_bits - 1) / k_mask_word_bits + 1;
}

}  // namespace

bool mask_has(const node_mask& mask, int node) noexcept {
  if (node < 0) return false;
  const size_t n = static_cast<size_t>(node);
  return n / k_mask_word_bits < mask.size() &&
         ((mask[n / k_mask_word_bits] >> (n % k_mask_word_bits)) & 1UL) != 0;
}

void mask_add(node_mask& mask, int node) {
  const size_t n = static_cast<size_t>(node);
  if (mask.size() <= n / k_mask_word_bits) mask.resize(n / k_mask_word_bits + 1, 0UL);
  mask[n / k_mask_word_bits] |= 1UL << (n % k_mask_word_bits);
}

bool mask_equal(const node_mask& a, const node_mask& b) noexcept {
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned long wa = i < a.size() ? a[i] : 0UL;
    const unsigned long wb = i < b.size() ? b[i] : 0UL;
    if (wa != wb) return false;
  }
  return true;
}

placement placement_on(int node) {
  placement p;
  if (node >= 0) {
    p.mode = policy::bind;
    mask_add(p.nodes, node);
  }
  return p;
}

dstatus validate(const placement& where, const char* what) {
  switch (where.mode) {
    case policy::default_policy: return dstatus::success();
    case policy::preferred:
    case policy::bind:
    case policy::interleave: break;
    default:
      return refused(errc::invalid_value,
                     fmt::format("{}: unknown policy {}", what, static_cast<int>(where.mode)));
  }
  if (mask_count(where.nodes) == 0)
    return refused(errc::invalid_value, fmt::format("{}: the node set is empty", what));
  for (size_t w = 0; w < where.nodes.size(); ++w) {
    for (size_t b = 0; b < k_mask_word_bits; ++b) {
      if (!((where.nodes[w] >> b) & 1UL)) continue;
      const size_t node = w * k_mask_word_bits + b;
      if (node > static_cast<size_t>(INT_MAX) || !node_exists(static_cast<int>(node)))
        return bad_node(static_cast<int>(std::min<size_t>(node, INT_MAX)), what);
    }
  }
  return dstatus::success();
}

bool numa_available() noexcept { return ::numa_available() >= 0; }

bool node_exists(int node) noexcept {
  if (node < 0) return false;
  if (!numa_available()) return node == 0;
  if (node > ::numa_max_node()) return false;
  if (numa_nodes_ptr != nullptr) {
    return ::numa_bitmask_isbitset(numa_nodes_ptr, static_cast<unsigned>(node)) != 0;
  }
  return ::numa_node_size64(node, nullptr) >= 0;
}

size_t page_size() noexcept {
  static const size_t ps = [] {
    const long v = ::sysconf(_SC_PAGESIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{4096};
  }();
  return ps;
}

/// Lists the configured nodes (memoryless ones too, with 0 bytes) so callers see the same ids as
/// numactl. libnuma's free figure can momentarily exceed its total (separate meminfo reads), so
/// free is clamped to keep total >= free.
std::vector<numa_node> numa_nodes() {
  std::vector<numa_node> out;
  if (!numa_available()) {
    // No NUMA: the whole machine is node 0.
    numa_node n;
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long avail = ::sysconf(_SC_AVPHYS_PAGES);
    n.total_bytes = pages > 0 ? static_cast<size_t>(pages) * page_size() : 0;
    n.free_bytes = avail > 0 ? static_cast<size_t>(avail) * page_size() : 0;
    n.free_bytes = std::min(n.free_bytes, n.total_bytes);
    const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
    for (long c = 0; c < std::max(cpus, 1L); ++c) n.cpus.push_back(static_cast<int>(c));
    out.push_back(std::move(n));
    return out;
  }

  std::unique_ptr<bitmask, void (*)(bitmask*)> cpumask(::numa_allocate_cpumask(),
                                                       ::numa_bitmask_free);
  const int max_node = ::numa_max_node();
  for (int id = 0; id <= max_node; ++id) {
    if (!node_exists(id)) continue;
    numa_node n;
    n.id = id;
    long long free_b = 0;
    const long long total = ::numa_node_size64(id, &free_b);
    n.total_bytes = total > 0 ? static_cast<size_t>(total) : 0;
    n.free_bytes = free_b > 0 ? static_cast<size_t>(free_b) : 0;
    n.free_bytes = std::min(n.free_bytes, n.total_bytes);
    if (cpumask && ::numa_node_to_cpus(id, cpumask.get()) == 0) {
      const unsigned bits = static_cast<unsigned>(cpumask->size);
      for (unsigned c = 0; c < bits; ++c) {
        if (::numa_bitmask_isbitset(cpumask.get(), c)) n.cpus.push_back(static_cast<int>(c));
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

dstatus allocate(size_t size, int node, void** ptr) {
  return allocate(size, placement_on(node), nullptr, ptr);
}

/// mmap rather than malloc: page alignment is what mbind/move_pages/madvise need, and the pages
/// stay untouched (no first-touch placement) until the caller writes, so the policy decides.
dstatus allocate(size_t size, const placement& where, void* hint, void** ptr) {
  if (ptr == nullptr) return refused(errc::invalid_value, "host allocate: ptr is null");
  if (size == 0) return refused(errc::invalid_value, "host allocate: size is 0");
  const size_t ps = page_size();
  if (size > SIZE_MAX - (ps - 1)) {
    return refused(errc::invalid_value,
                   fmt::format("host allocate: size {} cannot be rounded to pages", size));
  }
  if (dstatus s = validate(where, "host allocate"); !s.ok()) return s;
  const size_t rounded = (size + ps - 1) & ~(ps - 1);

  void* p = fresh_mmap(hint, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return from_errno(err == ENOMEM ? errc::out_of_memory : errno_to_errc(err), err,
                      fmt::format("host allocate: mmap of {} bytes", rounded));
  }

  // Without NUMA support node 0 is the only memory there is; no policy to set. A fresh mapping
  // already has the default policy.
  if (where.mode != policy::default_policy && numa_available()) {
    if (const int err = apply_placement(p, rounded, where, 0); err != 0) {
      ::munmap(p, rounded);
      // EINVAL here means a node has no memory (e.g. a CPU-only node): a bad device choice.
      return from_errno(err == EINVAL ? errc::invalid_device : errno_to_errc(err), err,
                        fmt::format("host allocate: mbind to NUMA nodes {}",
                                    mask_text(where.nodes)));
    }
  }
  *ptr = p;
  return dstatus::success();
}

/// Refuses what allocate() cannot have returned (null, unaligned, size 0) instead of letting
/// munmap unmap a neighbour's pages.
dstatus deallocate(void* ptr, size_t size) {
  if (ptr == nullptr) return refused(errc::invalid_value, "host deallocate: ptr is null");
  if (size == 0) return refused(errc::invalid_value, "host deallocate: size is 0");
  const size_t ps = page_size();
  if (reinterpret_cast<uintptr_t>(ptr) % ps != 0) {
    return refused(errc::invalid_value,
                   fmt::format("host deallocate: {} is not page-aligned, not from allocate()",
                               ptr));
  }
  if (size > SIZE_MAX - (ps - 1)) {
    return refused(errc::invalid_value,
                   fmt::format("host deallocate: size {} cannot be rounded to pages", size));
  }
  const size_t rounded = (size + ps - 1) & ~(ps - 1);
  if (::munmap(ptr, rounded) != 0) {
    const int err = errno;
    return from_errno(err == EINVAL ? errc::invalid_value : errno_to_errc(err), err,
                      "host deallocate: munmap");
  }
  return dstatus::success();
}

/// move_pages() rather than mbind(MPOL_MF_MOVE): it moves the resident pages without changing
/// the memory policy of the range, so neighbours sharing the rounded first/last page keep theirs.
/// Pages still not backed after the populate step (-ENOENT: an old kernel, or a range that cannot
/// be written; -EFAULT after check_mapped: the zero page) have nothing to move and are skipped;
/// they land where their policy says when first written.
dstatus migrate(const void* ptr, size_t size, int node) {
  if (ptr == nullptr) return refused(errc::invalid_value, "host migrate: ptr is null");
  if (size == 0) return refused(errc::invalid_value, "host migrate: size is 0");
  uintptr_t begin = 0, end = 0;
  if (!page_range(ptr, size, &begin, &end)) {
    return refused(errc::invalid_value, "host migrate: range overflows the address space");
  }
  if (!node_exists(node)) return bad_node(node, "host migrate");
  if (dstatus s = check_mapped(begin, end, "host migrate"); !s.ok()) return s;
  if (!numa_available()) return dstatus::success();  // one node: everything is on node 0
  // A prefetch promises the whole range on `node`; never-written pages have nothing to move, so
  // they are faulted in first (zero-filled, their content unchanged; this commits the whole
  // range). Best effort: kernels before 5.14 (EINVAL) and ranges that cannot be written leave
  // them to first touch. Running out of memory is an error, not something to go on with.
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0 &&
      errno == ENOMEM)
    return refused(errc::out_of_memory,
                   fmt::format("host migrate: no memory to fault in {} bytes before moving them "
                               "to node {}",
                               end - begin, node));

  const size_t ps = page_size();
  const size_t total = (end - begin) / ps;
  std::vector<void*> pages;
  std::vector<int> nodes;
  std::vector<int> status;
  for (size_t first = 0; first < total; first += k_move_batch) {
    const size_t n = std::min(k_move_batch, total - first);
    pages.resize(n);
    nodes.assign(n, node);
    status.assign(n, 0);
    for (size_t i = 0; i < n; ++i) pages[i] = reinterpret_cast<void*>(begin + (first + i) * ps);
    const long r = ::move_pages(0, static_cast<unsigned long>(n), pages.data(), nodes.data(),
                                status.data(), MPOL_MF_MOVE);
    if (r < 0) {
      const int err = errno;
      errc code = errno_to_errc(err);
      if (err == ENODEV) code = errc::invalid_device;  // target node has no memory
      return from_errno(code, err, fmt::format("host migrate: move_pages to NUMA node {}", node));
    }
    for (size_t i = 0; i < n; ++i) {
      const int st = status[i];
      if (st >= 0 || st == -ENOENT || st == -EFAULT) continue;
      const int err = -st;
      return from_errno(errno_to_errc(err), err,
                        fmt::format("host migrate: page {} could not move to NUMA node {}",
                                    pages[i], node));
    }
  }
  return dstatus::success();
}

/// move_pages() with nodes == NULL only reports where each page is. -ENOENT (never touched) and
/// -EFAULT (zero page, read but never written, on kernels that say so; 6.18 answers the zero
/// page's node instead; the range is checked mapped first) read as -1.
/// Without NUMA support, resident pages (mincore) are on node 0.
dstatus query_node(const void* ptr, size_t size, int* node) {
  if (node == nullptr) return refused(errc::invalid_value, "host query_node: node is null");
  if (ptr == nullptr) return refused(errc::invalid_value, "host query_node: ptr is null");
  if (size == 0) return refused(errc::invalid_value, "host query_node: size is 0");
  uintptr_t begin = 0, end = 0;
  if (!page_range(ptr, size, &begin, &end)) {
    return refused(errc::invalid_value, "host query_node: range overflows the address space");
  }
  if (dstatus s = check_mapped(begin, end, "host query_node"); !s.ok()) return s;

  const size_t ps = page_size();
  const size_t total = (end - begin) / ps;
  bool first_page = true;
  int agreed = MEMAREA_INVALID_DEVICE_ID;
  auto merge = [&](int where) {
    if (first_page) {
      agreed = where;
      first_page = false;
    } else if (agreed != where) {
      agreed = MEMAREA_INVALID_DEVICE_ID;
    }
  };

  std::vector<void*> pages;
  std::vector<int> status;
  std::vector<unsigned char> resident;
  for (size_t first = 0; first < total; first += k_move_batch) {
    const size_t n = std::min(k_move_batch, total - first);
    const uintptr_t batch = begin + first * ps;
    if (!numa_available()) {
      resident.assign(n, 0);
      if (::mincore(reinterpret_cast<void*>(batch), n * ps, resident.data()) != 0) {
        const int err = errno;
        return from_errno(err == ENOMEM ? errc::invalid_value : errno_to_errc(err), err,
                          "host query_node: mincore");
      }
      for (size_t i = 0; i < n; ++i) merge((resident[i] & 1) ? 0 : -1);
      continue;
    }
    pages.resize(n);
    status.assign(n, 0);
    for (size_t i = 0; i < n; ++i) pages[i] = reinterpret_cast<void*>(batch + i * ps);
    if (::move_pages(0, static_cast<unsigned long>(n), pages.data(), nullptr, status.data(), 0) !=
        0) {
      const int err = errno;
      return from_errno(errno_to_errc(err), err, "host query_node: move_pages");
    }
    for (size_t i = 0; i < n; ++i) {
      const int st = status[i];
      if (st >= 0) {
        merge(st);
      } else if (st == -ENOENT || st == -EFAULT) {
        merge(-1);
      } else {
        const int err = -st;
        return from_errno(errno_to_errc(err), err,
                          fmt::format("host query_node: page {}", pages[i]));
      }
    }
  }
  *node = agreed;
  return dstatus::success();
}

/// madvise needs a page-aligned start, so the range is rounded out. Advice that discards data
/// (DONTNEED, FREE, REMOVE, WIPEONFORK, DONTFORK) is refused on an unaligned range, because the
/// rounding would apply it to bytes outside the caller's range.
dstatus advise(const void* ptr, size_t size, int madvice) {
  if (ptr == nullptr) return refused(errc::invalid_value, "host advise: ptr is null");
  if (size == 0) return refused(errc::invalid_value, "host advise: size is 0");
  uintptr_t begin = 0, end = 0;
  if (!page_range(ptr, size, &begin, &end)) {
    return refused(errc::invalid_value, "host advise: range overflows the address space");
  }
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (destructive_advice(madvice) && (p != begin || p + size != end)) {
    return refused(errc::invalid_value,
                   fmt::format("host advise: advice {} discards data and [{}, +{}) is not "
                               "page-aligned; rounding would reach bytes outside the range",
                               madvice, ptr, size));
  }
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, madvice) != 0) {
    const int err = errno;
    errc code = errno_to_errc(err);
    if (err == ENOMEM) code = errc::invalid_value;  // madvise: part of the range is unmapped
    return from_errno(code, err, fmt::format("host advise: madvise({})", madvice));
  }
  return dstatus::success();
}

dstatus set_policy(const void* ptr, size_t size, policy p, int node) {
  if (ptr == nullptr) return refused(errc::invalid_value, "host set_policy: ptr is null");
  if (size == 0) return refused(errc::invalid_value, "host set_policy: size is 0");
  uintptr_t begin = 0, end = 0;
  if (!page_range(ptr, size, &begin, &end)) {
    return refused(errc::invalid_value, "host set_policy: range overflows the address space");
  }
  int mode = MPOL_DEFAULT;
  switch (p) {
    case policy::default_policy: break;
    case policy::preferred: mode = MPOL_PREFERRED; break;
    case policy::bind: mode = MPOL_BIND; break;
    case policy::interleave: mode = MPOL_INTERLEAVE; break;
    default:
      return refused(errc::invalid_value,
                     fmt::format("host set_policy: unknown policy {}", static_cast<int>(p)));
  }
  if (mode != MPOL_DEFAULT && !node_exists(node)) return bad_node(node, "host set_policy");
  if (dstatus s = check_mapped(begin, end, "host set_policy"); !s.ok()) return s;
  if (!numa_available()) return dstatus::success();  // one node: nothing to choose between
  if (const int err = mbind_node(reinterpret_cast<void*>(begin), end - begin, mode, node);
      err != 0) {
    // EINVAL for a node that exists is a node without memory (or outside the cpuset).
    return from_errno(err == EINVAL && mode != MPOL_DEFAULT ? errc::invalid_device
                                                            : errno_to_errc(err),
                      err, fmt::format("host set_policy: mbind({}) to NUMA node {}", mode, node));
  }
  return dstatus::success();
}

dstatus set_policy(const void* ptr, size_t size, const placement& where, bool move) {
  if (ptr == nullptr) return refused(errc::invalid_value, "host set_policy: ptr is null");
  if (size == 0) return refused(errc::invalid_value, "host set_policy: size is 0");
  uintptr_t begin = 0, end = 0;
  if (!page_range(ptr, size, &begin, &end)) {
    return refused(errc::invalid_value, "host set_policy: range overflows the address space");
  }
  if (dstatus s = validate(where, "host set_policy"); !s.ok()) return s;
  if (dstatus s = check_mapped(begin, end, "host set_policy"); !s.ok()) return s;
  if (!numa_available()) return dstatus::success();  // one node: nothing to choose between
  if (const int err = apply_placement(reinterpret_cast<void*>(begin), end - begin, where,
                                      move ? MPOL_MF_MOVE : 0U);
      err != 0) {
    // EINVAL for nodes that exist is a node without memory (or outside the cpuset).
    return from_errno(err == EINVAL && where.mode != policy::default_policy
                          ? errc::invalid_device
                          : errno_to_errc(err),
                      err,
                      fmt::format("host set_policy: mbind(policy {}) to NUMA nodes {}",
                                  static_cast<int>(where.mode), mask_text(where.nodes)));
  }
  return dstatus::success();
}

dstatus policy_at(const void* addr, int* mode, node_mask* nodes) {
  if (mode == nullptr || nodes == nullptr)
    return refused(errc::invalid_value, "host policy_at: mode or nodes is null");
  if (!numa_available())
    return refused(errc::not_supported, "host policy_at: the kernel has no NUMA support");
  node_mask mask(kernel_mask_words(), 0UL);
  int kernel_mode = 0;
  // The kernel writes maxnode-1 bits rounded up to whole words: one word fewer than the buffer.
  const unsigned long maxnode = (mask.size() - 1) * k_mask_word_bits + 1;
  if (::get_mempolicy(&kernel_mode, mask.data(), maxnode, const_cast<void*>(addr), MPOL_F_ADDR) !=
      0) {
    const int err = errno;
    // EFAULT: no mapping at addr.
    return from_errno(err == EFAULT ? errc::invalid_value : errno_to_errc(err), err,
                      fmt::format("host policy_at: get_mempolicy at {}", addr));
  }
  *mode = kernel_mode & ~(k_mode_flags);
  *nodes = std::move(mask);
  return dstatus::success();
}

dstatus allowed_nodes(node_mask* nodes) {
  if (nodes == nullptr) return refused(errc::invalid_value, "host allowed_nodes: nodes is null");
  if (!numa_available()) {
    node_mask only_zero;
    mask_add(only_zero, 0);
    *nodes = std::move(only_zero);
    return dstatus::success();
  }
  node_mask mask(kernel_mask_words(), 0UL);
  const unsigned long maxnode = (mask.size() - 1) * k_mask_word_bits + 1;
  if (::get_mempolicy(nullptr, mask.data(), maxnode, nullptr, MPOL_F_MEMS_ALLOWED) != 0) {
    const int err = errno;
    return from_errno(errno_to_errc(err), err, "host allowed_nodes: get_mempolicy");
  }
  *nodes = std::move(mask);
  return dstatus::success();
}

}  // namespace memarea::detail::host
