// registry::locate's per-thread cache (core/registry.hpp): whatever it answers from the cache
// must be what find() would answer now. Removals, re-insertions at the same base with another
// size, kind or device, insertions into a gap that was cached as empty, and several registries
// sharing one cache; then a writer and a reader racing (TSan runs it: label concurrency).
#include "core/memory/registry.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

using namespace memarea::detail;

namespace {

/// Addresses nobody dereferences: the registry only compares them.
void* at(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

record make(std::uintptr_t base, std::size_t size, memarea_memory_kind kind, int device) {
  record r;
  r.base = at(base);
  r.size = size;
  r.requested = size;
  r.kind = kind;
  r.device = device;
  r.context_device = device < 0 ? 0 : device;
  return r;
}

bool erase(registry& reg, std::uintptr_t base) {
  return reg.erase_if(at(base), [](const record&) { return true; }).has_value();
}

}  // namespace

TEST(RegistryCache, AHitIsForgottenOnceTheAllocationIsErased) {
  registry reg;
  registry_cache::cache c;
  reg.insert(make(0x100000, 0x2000, MEMAREA_MEMORY_DEVICE, 0));
  span_info s;
  ASSERT_TRUE(reg.locate(at(0x101000), &s, c));
  EXPECT_EQ(s.base, at(0x100000));
  EXPECT_EQ(s.size, 0x2000u);
  ASSERT_TRUE(reg.locate(at(0x101000), &s, c));  // from the cache now
  ASSERT_TRUE(erase(reg, 0x100000));
  EXPECT_FALSE(reg.locate(at(0x101000), &s, c));
  EXPECT_FALSE(reg.locate(at(0x100000), &s, c));
}

TEST(RegistryCache, AReallocationAtTheSameBaseIsSeenWithItsSizeKindAndDevice) {
  registry reg;
  registry_cache::cache c;
  reg.insert(make(0x100000, 0x4000, MEMAREA_MEMORY_DEVICE, 0));
  span_info s;
  ASSERT_TRUE(reg.locate(at(0x103000), &s, c));
  ASSERT_TRUE(reg.locate(at(0x100000), &s, c));
  EXPECT_EQ(s.kind, MEMAREA_MEMORY_DEVICE);
  ASSERT_TRUE(erase(reg, 0x100000));
  reg.insert(make(0x100000, 0x1000, MEMAREA_MEMORY_HOST_PINNED, MEMAREA_CPU_DEVICE_ID));
  // The old span reached 0x103000; the new one ends at 0x101000.
  EXPECT_FALSE(reg.locate(at(0x103000), &s, c));
  ASSERT_TRUE(reg.locate(at(0x100000), &s, c));
  EXPECT_EQ(s.size, 0x1000u);
  EXPECT_EQ(s.kind, MEMAREA_MEMORY_HOST_PINNED);
  EXPECT_EQ(s.device, MEMAREA_CPU_DEVICE_ID);
  // insert() over a live base replaces the record (pools take over their blocks' records so).
  reg.insert(make(0x100000, 0x1000, MEMAREA_MEMORY_DEVICE, 1));
  ASSERT_TRUE(reg.locate(at(0x100000), &s, c));
  EXPECT_EQ(s.kind, MEMAREA_MEMORY_DEVICE);
  EXPECT_EQ(s.device, 1);
  EXPECT_EQ(s.context_device, 1);
}

TEST(RegistryCache, AMissIsForgottenOnceSomethingIsInsertedThere) {
  registry reg;
  registry_cache::cache c;
  span_info s;
  EXPECT_FALSE(reg.locate(at(0x200000), &s, c));  // the whole address space is one gap
  EXPECT_FALSE(reg.locate(at(0x200000), &s, c));  // from the cache
  reg.insert(make(0x200000, 0x1000, MEMAREA_MEMORY_MANAGED, 0));
  ASSERT_TRUE(reg.locate(at(0x200000), &s, c));
  EXPECT_EQ(s.kind, MEMAREA_MEMORY_MANAGED);
}

TEST(RegistryCache, GapsAndSpansEndWhereFindSaysTheyDo) {
  registry reg;
  registry_cache::cache c;
  reg.insert(make(0x100000, 0x1000, MEMAREA_MEMORY_DEVICE, 0));
  reg.insert(make(0x200000, 0x1000, MEMAREA_MEMORY_DEVICE, 1));
  span_info s;
  // Fill the cache with the gap between them, then ask at both of its ends and just outside.
  EXPECT_FALSE(reg.locate(at(0x180000), &s, c));
  EXPECT_FALSE(reg.locate(at(0x101000), &s, c));
  EXPECT_FALSE(reg.locate(at(0x1fffff), &s, c));
  ASSERT_TRUE(reg.locate(at(0x200000), &s, c));
  EXPECT_EQ(s.device, 1);
  ASSERT_TRUE(reg.locate(at(0x100fff), &s, c));
  EXPECT_EQ(s.device, 0);
  // And the span of the first one: its last byte is in, the next byte is not.
  ASSERT_TRUE(reg.locate(at(0x100000), &s, c));
  EXPECT_FALSE(reg.locate(at(0x101000), &s, c));
  EXPECT_FALSE(reg.locate(at(0x0fffff), &s, c));
  // Every answer agrees with find().
  for (std::uintptr_t a : {0x0fffffu, 0x100000u, 0x100fffu, 0x101000u, 0x1fffffu, 0x200000u,
                           0x200fffu, 0x201000u}) {
    SCOPED_TRACE(a);
    const auto f = reg.find(at(a));
    ASSERT_EQ(reg.locate(at(a), &s, c), f.has_value());
    if (f) {
      EXPECT_EQ(s.base, f->base);
    }
  }
}

TEST(RegistryCache, AZeroByteAllocationOwnsItsBaseOnly) {
  registry reg;
  registry_cache::cache c;
  reg.insert(make(0x300000, 0, MEMAREA_MEMORY_HOST_PINNED, MEMAREA_CPU_DEVICE_ID));
  span_info s;
  ASSERT_TRUE(reg.locate(at(0x300000), &s, c));
  EXPECT_EQ(s.size, 0u);
  EXPECT_FALSE(reg.locate(at(0x300001), &s, c));
}

TEST(RegistryCache, OneCacheNeverAnswersForAnotherRegistry) {
  registry a, b;
  registry_cache::cache c;
  a.insert(make(0x100000, 0x1000, MEMAREA_MEMORY_DEVICE, 0));
  span_info s;
  ASSERT_TRUE(a.locate(at(0x100000), &s, c));
  EXPECT_FALSE(b.locate(at(0x100000), &s, c));
  EXPECT_TRUE(a.locate(at(0x100000), &s, c));
}

TEST(RegistryCache, MoreAllocationsThanEntriesAllStayCorrect) {
  registry reg;
  registry_cache::cache c;
  constexpr int n = 3 * registry_cache::cache::size;
  for (int i = 0; i < n; ++i)
    reg.insert(make(0x100000 + 0x10000 * static_cast<std::uintptr_t>(i), 0x1000,
                    MEMAREA_MEMORY_DEVICE, i));
  span_info s;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(reg.locate(at(0x100800 + 0x10000 * static_cast<std::uintptr_t>(i)), &s, c));
      EXPECT_EQ(s.device, i);
    }
  }
}

// The lookup a copy makes: asking first the entry a hint names, whatever the hint says (a
// stale entry, another pointer's, a miss, a value past the cache), answers as find() does, and
// leaves in the hint an entry that answers for the pointer.
TEST(RegistryCache, AHintedLookupAnswersAsFindDoesWhateverTheHint) {
  registry reg;
  registry_cache::cache c;
  reg.insert(make(0x100000, 0x1000, MEMAREA_MEMORY_DEVICE, 0));
  reg.insert(make(0x200000, 0x1000, MEMAREA_MEMORY_HOST_PINNED, MEMAREA_CPU_DEVICE_ID));
  const std::uintptr_t probes[] = {0x100000, 0x100fff, 0x101000, 0x1fffff, 0x200800, 0x300000};
  auto agrees = [&](std::uintptr_t a, unsigned& hint) {
    const span_info* s = reg.lookup(at(a), c, hint);
    const auto f = reg.find(at(a));
    EXPECT_EQ(s != nullptr, f.has_value()) << std::hex << a;
    if (s && f) {
      EXPECT_EQ(s->base, f->base) << std::hex << a;
      EXPECT_EQ(s->kind, f->kind) << std::hex << a;
    }
    // The hint now names an entry that answers at once (the same span, or the same miss).
    EXPECT_EQ(reg.lookup(at(a), c, hint), s);
  };
  for (int round = 0; round < 3; ++round) {
    for (unsigned start = 0; start < 2 * registry_cache::cache::size + 1; ++start) {
      for (std::uintptr_t a : probes) {
        SCOPED_TRACE(start);
        unsigned hint = start;
        agrees(a, hint);
      }
    }
    // One hint per pointer, as copies keep them, across a change: the old answers retire.
    unsigned dst_hint = 0, src_hint = 0;
    agrees(0x100010, dst_hint);
    agrees(0x200010, src_hint);
    ASSERT_TRUE(erase(reg, 0x100000));
    agrees(0x100010, dst_hint);
    agrees(0x200010, src_hint);
    reg.insert(make(0x100000, 0x1000, MEMAREA_MEMORY_DEVICE, 1));
    agrees(0x100010, dst_hint);
    EXPECT_EQ(reg.lookup(at(0x100010), c, dst_hint)->device, 1);
  }
}

// A writer inserts and erases one base over and over, each incarnation with its own size, and
// says how far it got through an atomic: 3i+1 "incarnation i is in", 3i+2 "about to erase it",
// 3i+3 "erased" (release; the reader acquires). A reader's lookup must never answer with an
// incarnation erased before the lookup began (a cached answer the erase should have retired),
// and when the writer stood at "i is in" both before and after the lookup, it must answer i:
// whatever retired an older answer (the insert) happened before it, and the erase had not
// begun (had the lookup seen the erase, it would also see "about to erase" afterwards).
TEST(RegistryCache, AReaderNeverSeesAnAllocationErasedBeforeItLookedConcurrently) {
  registry reg;
  constexpr std::uintptr_t base = 0x400000;
  constexpr std::size_t first = 0x1000;
  constexpr int rounds = 1000;
  std::atomic<int> progress{0};
  std::atomic<int> stale{0}, missed{0}, checked{0};
  std::atomic<long> lookups{0};
  std::thread reader([&] {
    registry_cache::cache c;
    span_info s;
    int before = 0;
    while (before < 3 * rounds) {
      before = progress.load(std::memory_order_acquire);
      const bool found = reg.locate(at(base), &s, c);
      const int after = progress.load(std::memory_order_acquire);
      lookups.fetch_add(1, std::memory_order_relaxed);
      const int incarnation = found ? static_cast<int>(s.size - first) : -1;
      const int erased = before / 3 - 1;  // the last incarnation erased before the lookup
      if (found && incarnation <= erased) ++stale;
      if (before == after && before % 3 == 1) {
        ++checked;
        if (incarnation != before / 3) ++missed;
      }
    }
  });
  for (int i = 0; i < rounds; ++i) {
    reg.insert(make(base, first + static_cast<std::size_t>(i), MEMAREA_MEMORY_DEVICE, 0));
    progress.store(3 * i + 1, std::memory_order_release);
    // Let the reader look twice while incarnation i stands (and so answer from its cache).
    const long seen = lookups.load(std::memory_order_relaxed);
    while (lookups.load(std::memory_order_relaxed) < seen + 2) std::this_thread::yield();
    progress.store(3 * i + 2, std::memory_order_release);
    if (!erase(reg, base)) {
      ADD_FAILURE() << "incarnation " << i << " was not there to erase";
      progress.store(3 * rounds, std::memory_order_release);  // lets the reader finish
      break;
    }
    progress.store(3 * i + 3, std::memory_order_release);
  }
  reader.join();
  EXPECT_EQ(stale.load(), 0);
  EXPECT_EQ(missed.load(), 0) << "of " << checked.load();
}
