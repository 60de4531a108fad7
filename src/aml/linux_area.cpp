// AML's linux area (aml/area/linux.h) on memarea's pageable host memory. Without options (or
// with options that ask for exactly that memory) an mmap is memarea host memory placed by the
// area's policy before any page is touched (memarea::host::allocate_placed, tagged as this
// area's); other options are the caller's own mmap(2), kept in a list of this file so that
// munmap frees exactly what was mapped and refuses anything else. docs/aml.md lists the
// differences from AML (its bugs included).
#include "aml_impl.hpp"
#include "fork_lock.hpp"
#include "linux_numa.hpp"

#include <memarea/host.hpp>
#include <memarea/pointer.hpp>

#include <aml.h>
#include <aml/area/linux.h>

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <optional>

namespace {

namespace dh = memarea::aml::numa;

constexpr std::size_t kWordBits = sizeof(unsigned long) * CHAR_BIT;

/// MPOL_PREFERRED_MANY (Linux 5.15), which numaif.h before libnuma 2.0.15 does not name.
constexpr int kPreferredMany = 5;

#ifndef MAP_FIXED_NOREPLACE
/// Linux 4.17's mmap flag, which C libraries before glibc 2.28 do not name.
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/// The tag of this area's memory (memarea::tag_of): its address, never its value.
// Writable, not const: identical read-only constants may be merged (-fmerge-all-constants,
// identical-code folding), which would give two areas one tag.
char g_tag = 0;
const void* tag() noexcept { return &g_tag; }

using memarea::aml::fail_code;

// --- Placement ------------------------------------------------------------------------------

/// The policy a C caller stored, read through its bytes (any int may be there); -1 when it is
/// none of the four.
int policy_value(const aml_area_linux_policy& p) noexcept {
  const int v = memarea::aml::enum_bits(p);
  return v >= AML_AREA_LINUX_POLICY_DEFAULT && v <= AML_AREA_LINUX_POLICY_INTERLEAVE ? v : -1;
}

dh::policy host_policy(int aml_policy) noexcept {
  switch (aml_policy) {
    case AML_AREA_LINUX_POLICY_BIND: return dh::policy::bind;
    case AML_AREA_LINUX_POLICY_PREFERRED: return dh::policy::preferred;
    case AML_AREA_LINUX_POLICY_INTERLEAVE: return dh::policy::interleave;
    default: return dh::policy::default_policy;
  }
}

/// Bits a node set may hold: far beyond any machine's nodes, and a bound on what is read
/// from a caller-built bitmask.
constexpr std::size_t kMaxNodeBits = std::size_t{1} << 16;

/// Words holding size bits (no overflow for any size).
std::size_t words_for(std::size_t bits) noexcept {
  return bits / kWordBits + (bits % kWordBits != 0);
}

/// libnuma's bitmask as a node mask: the first size bits of maskp. False when maskp is NULL
/// while size says it holds bits, or size is beyond kMaxNodeBits.
bool mask_of(const bitmask& set, dh::node_mask* out) {
  if (set.size == 0) {
    out->clear();
    return true;
  }
  if (!set.maskp || set.size > kMaxNodeBits) return false;
  const std::size_t words = words_for(set.size);
  out->assign(set.maskp, set.maskp + words);
  if (const std::size_t used = set.size % kWordBits; used != 0)
    out->back() &= (1UL << used) - 1;  // bits past size are not part of the set
  return true;
}

/// The placement data asks for: its policy over its node set (NULL: the allowed nodes). An
/// AML error code (positive) on failure.
int placement_of(const aml_area_linux_data& data, dh::placement* out) {
  const int policy = policy_value(data.policy);
  if (policy < 0) return AML_EINVAL;
  out->mode = host_policy(policy);
  if (data.nodeset) {
    if (!mask_of(*data.nodeset, &out->nodes)) return AML_EINVAL;
  } else if (!dh::allowed_nodes(&out->nodes).ok()) {
    return AML_FAILURE;
  }
  return AML_SUCCESS;
}

/// a & b.
dh::node_mask intersect(const dh::node_mask& a, const dh::node_mask& b) {
  dh::node_mask out(std::min(a.size(), b.size()));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[i] & b[i];
  return out;
}

/// Whether every node of a is in b.
bool subset(const dh::node_mask& a, const dh::node_mask& b) noexcept {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] & ~(i < b.size() ? b[i] : 0UL)) return false;
  return true;
}

std::size_t count(const dh::node_mask& m) noexcept {
  std::size_t n = 0;
  for (unsigned long w : m) n += static_cast<std::size_t>(__builtin_popcountl(w));
  return n;
}

// --- The caller's own mappings --------------------------------------------------------------

/// Mappings made with options that memarea does not record (file-backed, shared, fixed, other
/// protections or flags): base -> the size mmap was given. Never destroyed, so that a munmap
/// from another static's destructor still finds it.
struct own_mappings {
  /// Fork-safe, so that fork() from another thread never leaves it held in the child.
  memarea::aml::fork_safe_mutex m{memarea::aml::lock_rank::linux_mappings};
  std::map<std::uintptr_t, std::size_t> by_base;
};

own_mappings& mappings() {
  // Made on first use without a guard (a function-local static's guard could be left pending
  // by fork() in the child): a thread that loses the race deletes its copy.
  static constinit std::atomic<own_mappings*> made{nullptr};
  if (own_mappings* t = made.load(std::memory_order_acquire)) [[likely]]
    return *t;
  auto* mine = new own_mappings;
  own_mappings* expected = nullptr;
  if (made.compare_exchange_strong(expected, mine, std::memory_order_acq_rel)) return *mine;
  delete mine;
  return *expected;
}

/// mmap(2), with a clean shadow under AddressSanitizer: a child of a multi-threaded fork()
/// inherits the poisoned shadow of its parent's other threads' stacks, and a mapping that lands
/// there would read as a stack overflow on first access.
void* fresh_mmap(void* addr, std::size_t len, int prot, int flags, int fd, off_t off) {
  void* p = ::mmap(addr, len, prot, flags, fd, off);
#if defined(__SANITIZE_ADDRESS__)
  if (p != MAP_FAILED) __asan_unpoison_memory_region(p, len);
#endif
  return p;
}

std::uintptr_t addr(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

std::size_t page_round(std::size_t n) noexcept {
  const std::size_t ps = dh::page_size();
  return n > SIZE_MAX - (ps - 1) ? SIZE_MAX / ps * ps : (n + ps - 1) / ps * ps;
}

/// Whether [begin, end) overlaps a recorded mapping (caller holds the table's lock).
bool overlaps_recorded(const own_mappings& t, std::uintptr_t begin, std::uintptr_t end) {
  // Entries never overlap each other, so the last one starting before end is the only one
  // that can reach into the range.
  auto it = t.by_base.lower_bound(end);
  if (it == t.by_base.begin()) return false;
  --it;
  return it->first + page_round(it->second) > begin;
}

/// Drops recorded entries overlapping [begin, end): the kernel just gave that range out again,
/// so they were unmapped behind this area's back (munmap(2) called directly).
void forget_overlapping(own_mappings& t, std::uintptr_t begin, std::uintptr_t end) {
  auto it = t.by_base.lower_bound(end);
  while (it != t.by_base.begin()) {
    --it;
    if (it->first + page_round(it->second) <= begin) break;
    it = t.by_base.erase(it);
  }
}

/// Whether [begin, end) (not empty) overlaps memory memarea keeps records of.
bool overlaps_memarea(std::uintptr_t begin, std::uintptr_t end) {
  try {
    return memarea::overlaps_allocation(reinterpret_cast<const void*>(begin), end - begin);
  } catch (...) {  // out of host memory: the range is not known to be free
    return true;
  }
}

/// The AML code of an mmap(2)/mbind(2) errno.
int code_of_errno(int err) noexcept {
  switch (err) {
    case ENOMEM: return AML_ENOMEM;
    case EINVAL: return AML_EINVAL;
    case EPERM:
    case EACCES: return AML_EPERM;
    default: return AML_FAILURE;
  }
}

/// Options asking for what memarea's host memory is: private, anonymous, readable and
/// writable, nothing else (fd is ignored for anonymous memory, as mmap(2) does).
bool plain_memory(const aml_area_linux_mmap_options& o) noexcept {
  return o.flags == (MAP_PRIVATE | MAP_ANONYMOUS) && o.mode == (PROT_READ | PROT_WRITE) &&
         o.offset == 0;
}

/// mmap(2) at exactly o.ptr, replacing nothing: MAP_FIXED_NOREPLACE, which the kernel fails with
/// EEXIST when anything is mapped in the range. A kernel before Linux 4.17 ignores the flag and
/// takes the address as a hint, so an answer elsewhere is unmapped and reads as EEXIST too.
void* map_noreplace(std::size_t size, const aml_area_linux_mmap_options& o) {
  const int flags = (o.flags & ~MAP_FIXED) | MAP_FIXED_NOREPLACE;
  void* p = fresh_mmap(o.ptr, size, o.mode, flags, o.fd, o.offset);
  if (p != MAP_FAILED && p != o.ptr) {
    ::munmap(p, size);
    errno = EEXIST;
    return MAP_FAILED;
  }
  return p;
}

/// The caller's fixed-address mmap (MAP_FIXED or MAP_FIXED_NOREPLACE). MAP_FIXED replaces what
/// is there only when the whole range is mapped already (the caller's reservation, say) and
/// none of it is memory that memarea or the own-mappings list records: a range with no hole
/// cannot receive another thread's new mapping between that check and the mmap. Any other range
/// is mapped with map_noreplace, so a mapping that another thread makes in a hole meanwhile is
/// never replaced: the kernel refuses instead. MAP_FAILED with errno EEXIST when refused.
void* map_fixed(std::size_t size, const aml_area_linux_mmap_options& o) {
  const std::uintptr_t begin = addr(o.ptr);
  if (size > UINTPTR_MAX - begin) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  const std::uintptr_t end = begin + page_round(size);
  const bool replaces = (o.flags & MAP_FIXED) && !(o.flags & MAP_FIXED_NOREPLACE);
  if (!replaces || !dh::range_mapped(o.ptr, size)) return map_noreplace(size, o);
  auto& t = mappings();
  bool taken = false;
  {
    std::lock_guard lock(t.m);
    taken = overlaps_recorded(t, begin, end);
  }
  if (taken || overlaps_memarea(begin, end)) {
    errno = EEXIST;
    return MAP_FAILED;
  }
  return fresh_mmap(o.ptr, size, o.mode, o.flags, o.fd, o.offset);
}

/// mmap(2) with the caller's arguments, then `where` (pages already there move), recorded in
/// the own-mappings list. A fixed address never replaces memory that memarea or this list
/// records, nor a mapping another thread makes meanwhile (map_fixed): that is -AML_EINVAL.
void* map_own(const dh::placement& where, std::size_t size, const aml_area_linux_mmap_options& o) {
  auto& t = mappings();
  void* p = (o.flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))
                ? map_fixed(size, o)
                : fresh_mmap(o.ptr, size, o.mode, o.flags, o.fd, o.offset);
  if (p == MAP_FAILED && errno == EEXIST) return memarea::aml::fail_null_code(AML_EINVAL);
  if (p == MAP_FAILED) return memarea::aml::fail_null_code(code_of_errno(errno));
  if (where.mode != dh::policy::default_policy) {
    const dh::status s = dh::set_policy(p, size, where, true);
    if (!s.ok()) {
      ::munmap(p, size);
      if (s.native != 0) {
        errno = s.native;
        return memarea::aml::fail_null_code(AML_FAILURE);  // the kernel refused the policy
      }
      return memarea::aml::fail_null(memarea::c_report(
          "aml_area_mmap", static_cast<memarea_status>(s.code),
          s.code == memarea::errc::invalid_device
              ? "the area's node set names a NUMA node that does not exist"
              : "the area's policy or node set is not valid"));
    }
  }
  try {
    std::lock_guard lock(t.m);
    forget_overlapping(t, addr(p), addr(p) + page_round(size));
    t.by_base.emplace(addr(p), size);
  } catch (const std::bad_alloc&) {
    ::munmap(p, size);
    return memarea::aml::fail_null_code(AML_ENOMEM);
  }
  return p;
}

/// An mmap of the linux area: memarea host memory placed by `where`, or the caller's own
/// mapping (see the header).
void* map_memory(const dh::placement& where, std::size_t size, aml_area_mmap_options* opts) {
  if (size == 0) return memarea::aml::fail_null_code(AML_EINVAL);
  const auto* o = reinterpret_cast<const aml_area_linux_mmap_options*>(opts);
  if (o && !plain_memory(*o)) return map_own(where, size, *o);
  void* hint = o ? o->ptr : nullptr;
  void* p = nullptr;
  const memarea_status s = memarea::c_call("aml_area_mmap", [&] {
    p = memarea::host::allocate_placed(size, where, hint, tag());
  });
  if (s != MEMAREA_SUCCESS) return memarea::aml::fail_null(s);
  // An own-mapping entry overlapping this fresh memory is stale (its mapping was removed with
  // munmap(2) directly): dropped, so that it can never match a later munmap.
  auto& t = mappings();
  std::lock_guard lock(t.m);
  forget_overlapping(t, addr(p), addr(p) + page_round(size));
  return p;
}

/// The op: the area's policy over its node set.
void* mmap_with_policy(const aml_area_data* data, size_t size, aml_area_mmap_options* opts) {
  if (!data) return memarea::aml::fail_null_code(AML_EINVAL);
  try {
    dh::placement where;
    if (const int code =
            placement_of(*reinterpret_cast<const aml_area_linux_data*>(data), &where);
        code != AML_SUCCESS)
      return memarea::aml::fail_null_code(code);
    return map_memory(where, size, opts);
  } catch (const std::bad_alloc&) {
    return memarea::aml::fail_null_code(AML_ENOMEM);
  }
}

// --- Areas ----------------------------------------------------------------------------------

/// One block holds a created area, its data and its node set; destroy frees it at once.
struct area_block {
  aml_area area;
  aml_area_linux_data data;
  bitmask nodeset;
  // nodeset's words follow the block.
};
static_assert(sizeof(area_block) % alignof(unsigned long) == 0);

const char* policy_name(int policy) noexcept {
  switch (policy) {
    case AML_AREA_LINUX_POLICY_DEFAULT: return "default";
    case AML_AREA_LINUX_POLICY_BIND: return "bind";
    case AML_AREA_LINUX_POLICY_PREFERRED: return "preferred";
    case AML_AREA_LINUX_POLICY_INTERLEAVE: return "interleave";
    default: return nullptr;
  }
}

aml_area_linux_data g_default_data = {nullptr, AML_AREA_LINUX_POLICY_DEFAULT};

/// aml_area_linux_create once area and policy are checked; throws std::bad_alloc.
int create_area(aml_area** area, const aml_bitmap* nodemask, aml_area_linux_policy policy) {
  dh::node_mask allowed;
  if (!dh::allowed_nodes(&allowed).ok()) return -AML_FAILURE;
  // The set's size in bits is libnuma's for a node mask (numa_allocate_nodemask), so that
  // libnuma's bitmask calls read it as one of theirs; more only if an allowed node lies past it.
  const int possible = numa_num_possible_nodes();
  std::size_t words =
      possible > 0 ? (static_cast<std::size_t>(possible) + kWordBits - 1) / kWordBits : 1;
  for (std::size_t i = allowed.size(); i > words; --i)
    if (allowed[i - 1] != 0) {
      words = i;
      break;
    }
  allowed.resize(words, 0UL);  // drops zero words only
  dh::node_mask chosen = allowed;
  if (nodemask) {
    if (aml_bitmap_nset(nodemask) == 0) return -AML_EINVAL;  // no node to place pages on
    chosen.assign(words, 0UL);
    for (int n = aml_bitmap_first(nodemask); n >= 0 && n < AML_BITMAP_MAX; ++n) {
      if (aml_bitmap_isset(nodemask, static_cast<unsigned>(n)) != 1) continue;
      if (!dh::mask_has(allowed, n)) return -AML_EDOM;
      dh::mask_add(chosen, n);
    }
  }
  chosen.resize(words, 0UL);
  auto* block =
      static_cast<area_block*>(std::malloc(sizeof(area_block) + words * sizeof(unsigned long)));
  if (!block) return -AML_ENOMEM;
  auto* bits = reinterpret_cast<unsigned long*>(block + 1);
  std::copy(chosen.begin(), chosen.end(), bits);
  block->nodeset.size = words * kWordBits;
  block->nodeset.maskp = bits;
  block->data.nodeset = &block->nodeset;
  block->data.policy = policy;
  block->area.ops = &aml_area_linux_ops;
  block->area.data = reinterpret_cast<aml_area_data*>(&block->data);
  *area = &block->area;
  return AML_SUCCESS;
}

}  // namespace

bool memarea::aml::linux_area_pool_node(const aml_area_data* data, int* node) noexcept {
  if (!data || !node) return false;
  dh::placement where;
  try {
    if (placement_of(*reinterpret_cast<const aml_area_linux_data*>(data), &where) != AML_SUCCESS)
      return false;
  } catch (const std::bad_alloc&) {
    return false;
  }
  if (where.mode == dh::policy::default_policy) {
    *node = -1;
    return true;
  }
  if (where.mode != dh::policy::bind || count(where.nodes) != 1) return false;
  for (int n = 0;; ++n) {
    if (dh::mask_has(where.nodes, n)) {
      *node = n;
      return true;
    }
  }
}

extern "C" {

aml_area_ops aml_area_linux_ops = {mmap_with_policy, aml_area_linux_munmap,
                                   aml_area_linux_fprintf};
aml_area aml_area_linux = {&aml_area_linux_ops, reinterpret_cast<aml_area_data*>(&g_default_data)};

int aml_area_linux_create(aml_area** area, const aml_bitmap* nodemask,
                          const aml_area_linux_policy policy) {
  if (!area) return -AML_EINVAL;
  *area = nullptr;
  if (policy_value(policy) < 0) return -AML_EINVAL;
  try {
    return create_area(area, nodemask, policy);
  } catch (const std::bad_alloc&) {
    return -AML_ENOMEM;
  }
}

void aml_area_linux_destroy(aml_area** area) {
  if (!area || !*area) return;
  if (*area != &aml_area_linux) std::free(*area);  // the area is its block's first member
  *area = nullptr;
}

int aml_area_linux_mbind(aml_area_linux_data* bind, void* ptr, size_t size) {
  if (!bind || !ptr || size == 0) return fail_code(AML_EINVAL);
  if (addr(ptr) % dh::page_size() != 0) return fail_code(AML_EINVAL);
  dh::status s;
  try {
    dh::placement where;
    if (const int code = placement_of(*bind, &where); code != AML_SUCCESS)
      return fail_code(code);
    s = dh::set_policy(ptr, size, where, true);
  } catch (const std::bad_alloc&) {
    return fail_code(AML_ENOMEM);
  }
  if (s.ok()) return AML_SUCCESS;
  if (s.native != 0 && s.code != memarea::errc::invalid_value) {
    errno = s.native;
    return fail_code(AML_FAILURE);  // the kernel refused: errno says why, as AML documents
  }
  return fail_code(AML_EINVAL);  // refused before the kernel: bad set, range not mapped
}

int aml_area_linux_check_binding(aml_area_linux_data* area_data, void* ptr, size_t size) {
  if (!area_data || !ptr || size == 0) return fail_code(AML_EINVAL);
  const int policy = policy_value(area_data->policy);
  if (policy < 0) return fail_code(AML_EINVAL);
  try {
    dh::placement expected;
    if (const int code = placement_of(*area_data, &expected); code != AML_SUCCESS)
      return fail_code(code);
    if (!memarea::host::numa_available())
      return policy == AML_AREA_LINUX_POLICY_DEFAULT || dh::mask_has(expected.nodes, 0) ? 1 : 0;
    dh::node_mask allowed;
    if (!dh::allowed_nodes(&allowed).ok()) return fail_code(AML_FAILURE);
    // The kernel keeps a bind or interleave set narrowed to the nodes the cpuset allows.
    const dh::node_mask effective = intersect(expected.nodes, allowed);
    const std::size_t ps = dh::page_size();
    const std::uintptr_t first = addr(ptr) / ps * ps;
    if (size > UINTPTR_MAX - addr(ptr)) return fail_code(AML_EINVAL);
    const std::uintptr_t end = addr(ptr) + size;
    int mode = 0;
    dh::node_mask nodes;
    // One query per page: mbind may have split the range into areas of different policies.
    for (std::uintptr_t page = first; page < end; page += ps) {
      if (!dh::policy_at(reinterpret_cast<void*>(page), &mode, &nodes).ok())
        return fail_code(AML_EINVAL);  // not mapped
      bool matches = false;
      switch (policy) {
        case AML_AREA_LINUX_POLICY_DEFAULT: matches = mode == MPOL_DEFAULT; break;
        case AML_AREA_LINUX_POLICY_BIND:
          matches = mode == MPOL_BIND && dh::mask_equal(nodes, effective);
          break;
        case AML_AREA_LINUX_POLICY_INTERLEAVE:
          matches = mode == MPOL_INTERLEAVE && dh::mask_equal(nodes, effective);
          break;
        case AML_AREA_LINUX_POLICY_PREFERRED:
          matches = (mode == MPOL_PREFERRED && count(nodes) == 1 &&
                     subset(nodes, expected.nodes)) ||
                    (mode == kPreferredMany && dh::mask_equal(nodes, effective));
          break;
      }
      if (!matches) return 0;
      if (page > UINTPTR_MAX - ps) break;
    }
    return 1;
  } catch (const std::bad_alloc&) {
    return fail_code(AML_ENOMEM);
  }
}

void* aml_area_linux_mmap(const aml_area_data* area_data, size_t size,
                          aml_area_mmap_options* opts) {
  (void)area_data;  // no binding: the area's settings are not used
  try {
    return map_memory(dh::placement{}, size, opts);
  } catch (const std::bad_alloc&) {
    return memarea::aml::fail_null_code(AML_ENOMEM);
  }
}

int aml_area_linux_munmap(const aml_area_data* area_data, void* ptr, const size_t size) {
  (void)area_data;  // any linux area may unmap any linux area's memory, as in AML
  if (!ptr || size == 0) return fail_code(AML_EINVAL);
  // memarea's own memory first: a stale own-mapping entry may share its base. Freed only when
  // it is a linux area's (its tag) with the size its mmap was given, in one step with the check.
  std::optional<memarea::allocation_info> found;
  try {
    found = memarea::find(ptr);
  } catch (...) {  // no backend to ask about a pointer memarea does not know: not memarea's
  }
  if (found && found->base == ptr) {
    const memarea_status s =
        memarea::c_call("aml_area_munmap", [&] { memarea::free_tagged(ptr, size, tag()); });
    return s == MEMAREA_SUCCESS ? AML_SUCCESS : memarea::aml::fail_status(s);
  }
  auto& t = mappings();
  std::lock_guard lock(t.m);
  auto it = t.by_base.find(addr(ptr));
  if (it == t.by_base.end() || it->second != size) return fail_code(AML_EINVAL);
  if (::munmap(ptr, size) != 0) return fail_code(AML_FAILURE);
  t.by_base.erase(it);
  return AML_SUCCESS;
}

int aml_area_linux_fprintf(const aml_area_data* data, FILE* stream, const char* prefix) {
  if (!stream) return -AML_EINVAL;
  if (!prefix) prefix = "";
  std::fprintf(stream, "%s: area-linux: %p\n", prefix, static_cast<const void*>(data));
  if (!data) return AML_SUCCESS;
  const auto* d = reinterpret_cast<const aml_area_linux_data*>(data);
  if (!d->nodeset) {
    std::fprintf(stream, "%s: bitmask: 0x0\n", prefix);
  } else {
    const bitmask& set = *d->nodeset;
    std::fprintf(stream, "%s: bitmask: size: %lu\n", prefix, set.size);
    std::fprintf(stream, "%s: bitmask: maskp:", prefix);
    // The words up to the last one holding a node (at least one): word 0 first.
    const std::size_t words =
        set.maskp ? words_for(std::min<std::size_t>(set.size, kMaxNodeBits)) : 0;
    std::size_t shown = words ? 1 : 0;
    for (std::size_t i = 0; i < words; ++i)
      if (set.maskp[i]) shown = i + 1;
    for (std::size_t i = 0; i < shown; ++i) std::fprintf(stream, " %#lx", set.maskp[i]);
    std::fprintf(stream, "\n");
  }
  const int policy = memarea::aml::enum_bits(d->policy);
  if (const char* name = policy_name(policy))
    std::fprintf(stream, "%s: policy: %s\n", prefix, name);
  else
    std::fprintf(stream, "%s: policy: unknown (%d)\n", prefix, policy);
  return AML_SUCCESS;
}

}  // extern "C"
