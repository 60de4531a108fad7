// The AML benchmark: AML code's allocation loops on device memory through memarea's AML
// allocator API (aml_alloc / aml_free on buddy and sized allocators over aml_area_cuda, which
// draw from memarea pools), against memarea_pool_alloc / memarea_pool_free called directly
// and against the area itself (aml_area_mmap / aml_area_munmap of aml_area_cuda, one driver
// allocation per call: what AML code pays without an allocator), in the same run and in turns.
//
// Loops, as AML's own allocator benchmarks: (a) 1,024 allocations of 4 KiB, then their 1,024
// frees; (b) random sizes of 4 KiB to 16 MiB (fixed seed): a live set of up to 512 pieces
// (fewer where the device is small), then batches that free random live pieces and allocate
// new ones, 1,024 allocations in all, then every remaining free. Each phase of consecutive
// allocations or frees is timed as a whole: the rows give nanoseconds per allocation and per
// free apart. Cold: a new allocator (its pool empty, so its first blocks come from the driver);
// warm: further loops on the same allocator. Each loop writes random bytes into its first
// piece and the last piece of its first and last allocation phases (64 KiB at most, through
// memarea's copy) and reads them back.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/memarea.h>
#include <random>
#include <string>
#include <vector>

#include "bench/src/bench.hpp"

#include <aml.h>
#include <aml/area/cuda.h>
#include <aml/higher/allocator.h>
#include <aml/higher/allocator/buddy.h>
#include <aml/higher/allocator/sized.h>

namespace memarea::cli::bench {
namespace {

using clock_type = std::chrono::steady_clock;

/// One loop's allocations and frees: phases of consecutive allocations or frees, each item an
/// allocation's index.
struct plan {
  std::vector<std::size_t> sizes;  // of allocation i
  struct phase {
    bool alloc;
    std::vector<std::uint32_t> items;
  };
  std::vector<phase> phases;
};

/// (a): n allocations of size, then their frees in the same order.
plan fixed_plan(std::size_t n, std::size_t size) {
  plan p;
  p.sizes.assign(n, size);
  plan::phase a{true, {}}, f{false, {}};
  for (std::uint32_t i = 0; i < n; ++i) {
    a.items.push_back(i);
    f.items.push_back(i);
  }
  p.phases = {a, f};
  return p;
}

/// (b): total allocations of random sizes (multiples of 4 KiB, 4 KiB to 16 MiB, fixed seed):
/// `live` first, then batches of `batch` frees of random live pieces and `batch` allocations,
/// then the remaining frees in random order.
plan random_plan(std::size_t total, std::size_t live, std::size_t batch) {
  std::mt19937_64 rng(0x15A11);  // fixed: every run and every side replays the same loop
  std::uniform_int_distribution<std::size_t> pages(1, 4096);
  plan p;
  for (std::size_t i = 0; i < total; ++i) p.sizes.push_back(pages(rng) * 4096);
  std::vector<std::uint32_t> alive;
  std::uint32_t next = 0;
  auto alloc_phase = [&](std::size_t n) {
    plan::phase a{true, {}};
    for (std::size_t k = 0; k < n && next < total; ++k) {
      a.items.push_back(next);
      alive.push_back(next++);
    }
    p.phases.push_back(std::move(a));
  };
  auto free_phase = [&](std::size_t n) {
    plan::phase f{false, {}};
    for (std::size_t k = 0; k < n && !alive.empty(); ++k) {
      const std::size_t j = rng() % alive.size();
      f.items.push_back(alive[j]);
      alive[j] = alive.back();
      alive.pop_back();
    }
    p.phases.push_back(std::move(f));
  };
  alloc_phase(live);
  while (next < total) {
    free_phase(batch);
    alloc_phase(batch);
  }
  free_phase(alive.size());
  return p;
}

/// Writes random bytes into p (device memory; its first 64 KiB) through memarea's copy and
/// reads them back.
void check_bytes(void* p, std::size_t n, const std::string& what) {
  const std::size_t m = std::min<std::size_t>(n, std::size_t{64} << 10);
  std::vector<unsigned char> want(m), got(m, 0);
  std::mt19937_64 rng(static_cast<std::uint64_t>(clock_type::now().time_since_epoch().count()));
  for (std::size_t i = 0; i < m; i += 8) {
    const std::uint64_t x = rng() | 0x0101010101010101ull;  // no zero byte
    std::memcpy(want.data() + i, &x, std::min<std::size_t>(8, m - i));
  }
  copy(p, want.data(), m);
  copy(got.data(), p, m);
  if (got != want)
    throw error(errc::unknown, fmt::format("bench aml: {}: the bytes read back differ", what));
}

/// Nanoseconds per allocation and per free of one loop.
struct loop_ns {
  double alloc = 0;
  double free = 0;
};

[[noreturn]] void alloc_failed(const std::string& what) {
  throw error(errc::out_of_memory,
              fmt::format("bench aml: {}: an allocation failed ({})", what,
                          aml_strerror(aml_errno)));
}

/// Runs plan pl through alloc and free (templates: no indirect call in the timed loops).
template <class Alloc, class Free>
loop_ns run_plan(const plan& pl, Alloc&& alloc, Free&& free, const std::string& what) {
  std::vector<void*> ptrs(pl.sizes.size(), nullptr);
  double alloc_ns = 0, free_ns = 0;
  std::size_t allocs = 0, frees = 0;
  const plan::phase* last_alloc = nullptr;
  for (const plan::phase& ph : pl.phases)
    if (ph.alloc && !ph.items.empty()) last_alloc = &ph;
  bool first_checked = false;
  for (const plan::phase& ph : pl.phases) {
    const auto t0 = clock_type::now();
    if (ph.alloc) {
      for (std::uint32_t i : ph.items)
        if (!(ptrs[i] = alloc(pl.sizes[i]))) [[unlikely]]
          alloc_failed(what);
    } else {
      for (std::uint32_t i : ph.items) free(ptrs[i], pl.sizes[i]);
    }
    const double ns = std::chrono::duration<double, std::nano>(clock_type::now() - t0).count();
    if (ph.alloc) {
      alloc_ns += ns;
      allocs += ph.items.size();
      // The loop's first piece and the last of its first and last allocation phases.
      if (!ph.items.empty() && (!first_checked || &ph == last_alloc)) {
        if (!first_checked) check_bytes(ptrs[ph.items.front()], pl.sizes[ph.items.front()], what);
        check_bytes(ptrs[ph.items.back()], pl.sizes[ph.items.back()], what);
        first_checked = true;
      }
    } else {
      free_ns += ns;
      frees += ph.items.size();
    }
  }
  return {alloc_ns / static_cast<double>(allocs), free_ns / static_cast<double>(frees)};
}

/// The sides of a row set: each is timed per loop into its own samples.
struct samples {
  std::vector<double> alloc, free;
  void add(const loop_ns& l) {
    alloc.push_back(l.alloc);
    free.push_back(l.free);
  }
};

/// aml_alloc / aml_free through allocator a; a NULL or a refused free stops the bench.
auto aml_alloc_fn(aml_allocator* a) {
  return [a](std::size_t n) { return aml_alloc(a, n); };
}
auto aml_free_fn(aml_allocator* a) {
  return [a](void* p, std::size_t) {
    if (aml_free(a, p) != AML_SUCCESS)
      throw error(errc::unknown, "bench aml: aml_free refused a piece it handed out");
  };
}

/// Allocators made and destroyed with a readable failure.
aml_allocator* make_buddy() {
  aml_allocator* a = nullptr;
  if (aml_allocator_buddy_create(&a, &aml_area_cuda, nullptr) != AML_SUCCESS)
    throw error(errc::unknown, "bench aml: aml_allocator_buddy_create failed");
  return a;
}
aml_allocator* make_sized(std::size_t chunk) {
  aml_allocator* a = nullptr;
  const int err = aml_allocator_sized_create(&a, chunk, &aml_area_cuda, nullptr);
  if (err != AML_SUCCESS)
    throw error(errc::unknown, fmt::format("bench aml: aml_allocator_sized_create failed: {}",
                                           aml_strerror(err)));
  return a;
}
memarea_pool_t make_pool() {
  memarea_area_t area = nullptr;
  memarea_pool_t pool = nullptr;
  memarea_pool_options o = MEMAREA_POOL_OPTIONS_INIT;  // threshold max: keeps what it has
  if (memarea_area_create(&area, -1, MEMAREA_AREA_DEFAULT) != MEMAREA_SUCCESS ||
      memarea_pool_create(&pool, area, &o) != MEMAREA_SUCCESS)
    throw error(errc::unknown, "bench aml: memarea_pool_create failed");
  (void)memarea_area_destroy(area);  // the pool keeps what it needs of the area
  return pool;
}
auto pool_alloc_fn(memarea_pool_t pool) {
  return [pool](std::size_t n) {
    void* p = nullptr;
    return memarea_pool_alloc(pool, &p, n, nullptr) == MEMAREA_SUCCESS ? p : nullptr;
  };
}
auto pool_free_fn(memarea_pool_t pool) {
  return [pool](void* p, std::size_t) {
    if (memarea_pool_free(pool, p, nullptr) != MEMAREA_SUCCESS)
      throw error(errc::unknown, "bench aml: memarea_pool_free failed");
  };
}
auto raw_alloc_fn() {
  return [](std::size_t n) { return aml_area_mmap(&aml_area_cuda, n, nullptr); };
}
auto raw_free_fn() {
  return [](void* p, std::size_t n) {
    if (aml_area_munmap(&aml_area_cuda, p, n) != AML_SUCCESS)
      throw error(errc::unknown, "bench aml: aml_area_munmap failed");
  };
}

constexpr const char* kRawName = "aml_area_mmap+munmap (aml_area_cuda, no pool)";

row make_row(const std::string& variant, const std::vector<double>& ours,
             const std::vector<double>& raw) {
  row r;
  r.group = "aml allocator";
  r.variant = variant;
  r.unit = "ns";
  r.memarea_spread = spread_of(ours);
  r.raw_spread = spread_of(raw);
  r.memarea = r.memarea_spread.median;
  r.raw = r.raw_spread.median;
  r.raw_name = kRawName;
  return r;
}

/// The rows of one loop kind: for each allocator side, cold and warm, allocation and free,
/// each against the raw area.
struct side_result {
  std::string name;
  bool has_target;
  samples cold, warm;
};

void add_rows(context& ctx, const std::string& loop_name, const std::vector<side_result>& sides,
              const samples& raw) {
  for (const side_result& s : sides) {
    for (int warm = 0; warm < 2; ++warm) {
      const samples& got = warm ? s.warm : s.cold;
      for (int is_free = 0; is_free < 2; ++is_free) {
        row r = make_row(fmt::format("{}, {}, {} {}", s.name, loop_name,
                                     warm ? "warm" : "cold", is_free ? "free" : "alloc"),
                         is_free ? got.free : got.alloc, is_free ? raw.free : raw.alloc);
        if (s.has_target && warm) {
          r.target = "<= 60 ns";
          r.met = r.memarea <= 60.0;
        }
        r.note = warm ? "" : "a new allocator each sample: its first blocks come from the driver";
        ctx.add(r);
      }
    }
  }
}

void aml_case(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench aml: no devices, no rows\n";
    return;
  }
  if (aml_init(nullptr, nullptr) != AML_SUCCESS)
    throw error(errc::unknown, "bench aml: aml_init failed");
  if (memarea_set_device(0) != MEMAREA_SUCCESS)  // aml_area_cuda: the current device
    throw error(errc::unknown, "bench aml: cannot select device 0");
  const int cold_samples = ctx.quick ? 2 : 5;
  const int warm_samples = ctx.quick ? 5 : std::max(ctx.repetitions, 10);
  const int raw_samples = ctx.quick ? 2 : 5;  // the driver takes microseconds a call

  // --- (a) 1,024 x 4 KiB -------------------------------------------------------------------
  {
    const plan pl = fixed_plan(1024, 4096);
    side_result buddy{"buddy", true, {}, {}};
    side_result sized{"sized 4 KiB", true, {}, {}};
    side_result pool{"memarea_pool direct", false, {}, {}};
    samples raw;
    for (int i = 0; i < cold_samples; ++i) {
      aml_allocator* b = make_buddy();
      buddy.cold.add(run_plan(pl, aml_alloc_fn(b), aml_free_fn(b), "buddy 4 KiB"));
      (void)aml_allocator_buddy_destroy(&b);
      // The sized allocator's creation allocates (and frees) one piece, as AML's maps one: its
      // pool's first block is reserved before the loop.
      aml_allocator* s = make_sized(4096);
      sized.cold.add(run_plan(pl, aml_alloc_fn(s), aml_free_fn(s), "sized 4 KiB"));
      (void)aml_allocator_sized_destroy(&s);
      memarea_pool_t p = make_pool();
      pool.cold.add(run_plan(pl, pool_alloc_fn(p), pool_free_fn(p), "pool 4 KiB"));
      (void)memarea_pool_destroy(p);
      if (i < raw_samples) raw.add(run_plan(pl, raw_alloc_fn(), raw_free_fn(), "raw 4 KiB"));
    }
    aml_allocator* b = make_buddy();
    aml_allocator* s = make_sized(4096);
    memarea_pool_t p = make_pool();
    (void)run_plan(pl, aml_alloc_fn(b), aml_free_fn(b), "buddy 4 KiB");  // the cold loop
    (void)run_plan(pl, aml_alloc_fn(s), aml_free_fn(s), "sized 4 KiB");
    (void)run_plan(pl, pool_alloc_fn(p), pool_free_fn(p), "pool 4 KiB");
    for (int i = 0; i < warm_samples; ++i) {
      buddy.warm.add(run_plan(pl, aml_alloc_fn(b), aml_free_fn(b), "buddy 4 KiB"));
      sized.warm.add(run_plan(pl, aml_alloc_fn(s), aml_free_fn(s), "sized 4 KiB"));
      pool.warm.add(run_plan(pl, pool_alloc_fn(p), pool_free_fn(p), "pool 4 KiB"));
    }
    (void)aml_allocator_buddy_destroy(&b);
    (void)aml_allocator_sized_destroy(&s);
    (void)memarea_pool_destroy(p);
    add_rows(ctx, "1024 x 4 KiB", {buddy, sized, pool}, raw);
  }

  // --- (b) random 4 KiB..16 MiB ------------------------------------------------------------
  {
    // Up to 512 live pieces of 8 MiB on average (4 GiB) where the device has 32 GiB or more;
    // fewer on a small device (sim's 1 GiB: 16), so that a pool's blocks, fragmentation
    // included, never fill the device: a pool short of device memory gives its empty blocks
    // back and asks again, and the row would time the driver.
    memarea_device_properties props;
    if (memarea_get_device_properties(&props, 0) != MEMAREA_SUCCESS)
      throw error(errc::unknown, "bench aml: cannot read device 0's properties");
    const std::size_t fit = props.total_memory / 8 / (std::size_t{8} << 20);
    const std::size_t live = std::clamp<std::size_t>(fit, 8, 512);
    const std::size_t batch = std::max<std::size_t>(4, live / 8);
    const plan pl = random_plan(1024, live, batch);
    const std::string loop_name =
        fmt::format("random 4 KiB-16 MiB, {} live, 1024 allocs", live);
    side_result buddy{"buddy", false, {}, {}};
    side_result pool{"memarea_pool direct", false, {}, {}};
    samples raw;
    for (int i = 0; i < cold_samples; ++i) {
      aml_allocator* b = make_buddy();
      buddy.cold.add(run_plan(pl, aml_alloc_fn(b), aml_free_fn(b), "buddy random"));
      (void)aml_allocator_buddy_destroy(&b);
      memarea_pool_t p = make_pool();
      pool.cold.add(run_plan(pl, pool_alloc_fn(p), pool_free_fn(p), "pool random"));
      (void)memarea_pool_destroy(p);
      if (i < raw_samples) raw.add(run_plan(pl, raw_alloc_fn(), raw_free_fn(), "raw random"));
    }
    // One warm side at a time: two warm pools of this loop would hold twice its memory.
    aml_allocator* b = make_buddy();
    (void)run_plan(pl, aml_alloc_fn(b), aml_free_fn(b), "buddy random");
    for (int i = 0; i < warm_samples; ++i)
      buddy.warm.add(run_plan(pl, aml_alloc_fn(b), aml_free_fn(b), "buddy random"));
    (void)aml_allocator_buddy_destroy(&b);
    memarea_pool_t p = make_pool();
    (void)run_plan(pl, pool_alloc_fn(p), pool_free_fn(p), "pool random");
    for (int i = 0; i < warm_samples; ++i)
      pool.warm.add(run_plan(pl, pool_alloc_fn(p), pool_free_fn(p), "pool random"));
    (void)memarea_pool_destroy(p);
    add_rows(ctx, loop_name, {buddy, pool}, raw);
  }
}

const registrar reg("aml", aml_case, {
    "aml allocator: {buddy, sized 4 KiB, memarea_pool direct} x 1024 x 4 KiB, {cold, warm} "
    "{alloc, free}",
    "aml allocator: {buddy, memarea_pool direct} x random 4 KiB-16 MiB (16 live, 1024 "
    "allocs), {cold, warm} {alloc, free}"});

}  // namespace
}  // namespace memarea::cli::bench
