// Areas on every flag combination and device: data, lookup, bad input, device restore, threads.
#include "api/common.hpp"

#include <aml/area/cuda.h>
#include <aml/area/hip.h>
#include <memarea/memarea.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

using namespace memarea;
using namespace memarea::test;

namespace {

memory_kind expected_kind(unsigned flags) {
  if (flags & area_flags::unified) return memory_kind::managed;
  if (flags & area_flags::mapped)
    return (flags & area_flags::host) ? memory_kind::mapped : memory_kind::registered;
  if (flags & area_flags::host) return memory_kind::host_pinned;
  return memory_kind::device;
}

bool needs_host_range(unsigned flags) {
  return expected_kind(flags) == memory_kind::registered;
}

/// Copies random data into p (size n), through a device buffer of `other`, and back; checks
/// every byte.
void round_trip(void* p, std::size_t n, int other) {
  auto in = random_bytes(n);
  std::vector<unsigned char> out(n, 0);
  copy(p, in.data(), n);
  buffer mid = area(other).allocate(n);
  copy(mid.data(), p, n);
  copy(out.data(), mid.data(), n);
  ASSERT_EQ(0, std::memcmp(in.data(), out.data(), n)) << "through device " << other;
  // And straight back from p.
  std::vector<unsigned char> direct(n, 0);
  copy(direct.data(), p, n);
  ASSERT_EQ(0, std::memcmp(in.data(), direct.data(), n));
}

}  // namespace

TEST(Area, EveryFlagCombinationOnEveryDevice) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int n = devices();
  set_device(0);
  for (int d = 0; d < n; ++d) {
    for (unsigned flags = 0; flags <= area_flags::all; ++flags) {
      for (std::size_t size : {std::size_t{1}, std::size_t{4097}, std::size_t{(1u << 20) + 13}}) {
        SCOPED_TRACE(testing::Message() << "device " << d << " flags " << flags << " size "
                                        << size);
        area a(d, flags);
        EXPECT_EQ(a.kind(), expected_kind(flags));
        host_block range(size);
        mmap_options o;
        if (needs_host_range(flags)) o.ptr = range.ptr;
        if ((flags & area_flags::unified) && !has_managed(d)) {
          EXPECT_MEMAREA_ERROR((void)a.mmap(size, o), errc::not_supported);
          continue;
        }
        void* p = a.mmap(size, o);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(get_device(), 0) << "mmap changed the thread's device";
        if (needs_host_range(flags)) {
          EXPECT_EQ(p, range.ptr);
        }

        auto info = lookup(static_cast<char*>(p) + size / 2);
        EXPECT_EQ(info.base, p);
        EXPECT_GE(info.size, size);
        EXPECT_EQ(info.kind, expected_kind(flags));
        const bool on_device =
            info.kind == memory_kind::device || info.kind == memory_kind::managed;
        EXPECT_EQ(info.device, on_device ? d : MEMAREA_CPU_DEVICE_ID);

        round_trip(p, size, (d + 1) % n);
        if (info.kind == memory_kind::mapped || info.kind == memory_kind::registered) {
          void* dp = host_get_device_pointer(p);
          ASSERT_NE(dp, nullptr);
          // The device view holds the same bytes.
          auto in = random_bytes(size);
          std::memcpy(p, in.data(), size);
          std::vector<unsigned char> out(size);
          copy(out.data(), dp, size);
          EXPECT_EQ(0, std::memcmp(in.data(), out.data(), size));
        } else {
          EXPECT_MEMAREA_ERROR(host_get_device_pointer(p), errc::invalid_value);
        }
        a.munmap(p, size);
        auto after = find(p);
        EXPECT_TRUE(!after || after->kind != expected_kind(flags)) << "still registered";
      }
    }
  }
}

TEST(Area, CurrentDeviceAreaAndDeviceOverride) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int last = devices() - 1;
  set_device(last);
  area current;  // the calling thread's device at each mmap
  buffer b = current.allocate(64);
  EXPECT_EQ(b.device(), last);
  // options.device 0 is honoured (AML's `> 0` defect is not copied).
  mmap_options o;
  o.device = 0;
  void* p = area(last).mmap(128, o);
  EXPECT_EQ(lookup(p).device, 0);
  EXPECT_EQ(get_device(), last);
  area(last).munmap(p, 128);
  set_device(0);
}

TEST(Area, BadInputIsRefusedAndChangesNothing) {
  if (devices() == 0) {
    EXPECT_MEMAREA_ERROR((void)area(0), errc::no_device);
    EXPECT_MEMAREA_ERROR((void)area().mmap(64), errc::no_device);
    return;
  }
  const int n = devices();
  EXPECT_MEMAREA_ERROR((void)area(0, 0x10), errc::invalid_value);
  EXPECT_MEMAREA_ERROR((void)area(0, 0xffffffffu), errc::invalid_value);
  EXPECT_MEMAREA_ERROR((void)area(n), errc::invalid_device);
  EXPECT_MEMAREA_ERROR((void)area(-7), errc::invalid_device);
  area a(0);
  EXPECT_MEMAREA_ERROR((void)a.mmap(0), errc::invalid_value);
  mmap_options bad;
  bad.device = n;
  EXPECT_MEMAREA_ERROR((void)a.mmap(64, bad), errc::invalid_device);
  // MAPPED without HOST needs options.ptr.
  EXPECT_MEMAREA_ERROR((void)area(0, area_flags::mapped).mmap(64), errc::invalid_value);
  // More than the device has.
  const auto total = get_device_properties(0).total_memory;
  EXPECT_MEMAREA_ERROR((void)a.mmap(total + (std::size_t{1} << 30)), errc::out_of_memory);

  void* p = a.mmap(4096);
  const std::size_t live = find(p) ? 1 : 0;
  EXPECT_EQ(live, 1u);
  // Wrong size, interior pointer, other area, unknown pointer: refused, still allocated.
  EXPECT_MEMAREA_ERROR(a.munmap(p, 4095), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(a.munmap(static_cast<char*>(p) + 1, 4096), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(area(0, area_flags::host).munmap(p, 4096), errc::invalid_value);
  int local = 0;
  EXPECT_MEMAREA_ERROR(a.munmap(&local, sizeof local), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(a.munmap(nullptr, 4096), errc::invalid_value);
  ASSERT_TRUE(find(p).has_value());
  EXPECT_EQ(find(p)->base, p);
  // The memory still works.
  auto in = random_bytes(4096);
  std::vector<unsigned char> out(4096);
  copy(p, in.data(), 4096);
  copy(out.data(), p, 4096);
  EXPECT_EQ(in, out);
  a.munmap(p, 4096);
  // Twice.
  EXPECT_MEMAREA_ERROR(a.munmap(p, 4096), errc::invalid_value);
}

// Registering a host range that holds a whole allocation of memarea's inside it, neither of its
// ends in that allocation, is refused as registering one that starts or ends in it is: records
// never nest (the registry's lookups assume so).
TEST(Area, RegisteredRangeHoldingAWholeAllocationIsRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // Four pages of the test's own; the second goes back to the kernel and memarea's pageable
  // host memory takes its place (mmap's hint), so [range, range + 4 pages) holds it whole.
  void* mem = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* range = static_cast<char*>(mem);
  ASSERT_EQ(munmap(range + page, page), 0);
  void* inner = host::allocate_placed(page, host::placement{}, range + page);
  if (inner != range + page) {
    host::free(inner);
    munmap(range, page);
    munmap(range + 2 * page, 2 * page);
    GTEST_SKIP() << "the kernel placed the host allocation elsewhere than its hint";
  }
  EXPECT_TRUE(overlaps_allocation(range, 4 * page));
  EXPECT_FALSE(find(range).has_value());
  EXPECT_FALSE(find(range + 4 * page - 1).has_value());
  mmap_options o;
  o.ptr = range;
  void* registered = nullptr;
  try {
    registered = area(0, area_flags::mapped).mmap(4 * page, o);
    ADD_FAILURE() << "a range holding memarea's allocation at " << inner << " was registered";
  } catch (const error& e) {
    EXPECT_EQ(e.status(), errc::invalid_value) << e.what();
    EXPECT_NE(std::string(e.what()).find("overlaps memory memarea already manages"),
              std::string::npos)
        << e.what();
  }
  if (registered) area(0, area_flags::mapped).munmap(registered, 4 * page);
  // Nothing was registered: the range's ends are still no allocation of memarea's.
  EXPECT_FALSE(find(range).has_value());
  EXPECT_FALSE(find(range + 4 * page - 1).has_value());
  // The allocation inside is untouched.
  ASSERT_TRUE(find(inner).has_value());
  EXPECT_EQ(find(inner)->base, inner);
  EXPECT_EQ(find(inner)->kind, memory_kind::host);
  host::free(inner);
  munmap(range, page);
  munmap(range + 2 * page, 2 * page);
}

TEST(Area, ThreadDeviceUnchangedAfterFailureOnAnotherDevice) {
  MEMAREA_REQUIRE_DEVICES(2);
  set_device(1);
  const auto total = get_device_properties(0).total_memory;
  EXPECT_MEMAREA_ERROR((void)area(0).mmap(total + (std::size_t{1} << 30)), errc::out_of_memory);
  EXPECT_EQ(get_device(), 1);
  void* p = area(0).mmap(256);
  EXPECT_EQ(get_device(), 1);
  area(0).munmap(p, 256);
  EXPECT_EQ(get_device(), 1);
  set_device(0);
}

TEST(Area, BufferOwnsAndMoves) {
  MEMAREA_REQUIRE_DEVICES(1);
  area a(0, area_flags::host);
  void* p;
  {
    buffer b = a.allocate(1000);
    p = b.data();
    EXPECT_EQ(b.size(), 1000u);
    EXPECT_EQ(b.kind(), memory_kind::host_pinned);
    EXPECT_TRUE(find(p).has_value());
    buffer c = std::move(b);
    EXPECT_FALSE(b);
    EXPECT_EQ(c.data(), p);
  }
  auto after = find(p);
  EXPECT_TRUE(!after || after->kind != memory_kind::host_pinned);
}

TEST(Lookup, InteriorPointersOfEveryKindAndForeignPointers) {
  MEMAREA_REQUIRE_DEVICES(1);
  std::vector<std::pair<area, buffer>> live;
  host_block range(10000);
  for (unsigned flags : {0u, 1u, 2u, 5u, 4u, 9u}) {
    if ((flags & area_flags::unified) && !has_managed()) continue;  // NOT_SUPPORTED: tested above
    area a(0, flags);
    mmap_options o;
    if (needs_host_range(flags)) o.ptr = range.ptr;
    live.emplace_back(a, a.allocate(10000, o));
  }
  for (auto& [a, b] : live) {
    for (std::size_t off : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{9999}}) {
      auto i = lookup(static_cast<char*>(b.data()) + off);
      EXPECT_EQ(i.base, b.data());
      EXPECT_EQ(i.kind, a.kind());
    }
    memarea_allocation_info c;
    EXPECT_STATUS(memarea_pointer_get_info(&c, static_cast<char*>(b.data()) + 17), MEMAREA_SUCCESS);
    EXPECT_EQ(c.base, b.data());
    void* base = nullptr;
    size_t size = 0;
    EXPECT_STATUS(memarea_mem_get_address_range(&base, &size, static_cast<char*>(b.data()) + 5),
                  MEMAREA_SUCCESS);
    EXPECT_EQ(base, b.data());
    EXPECT_GE(size, 10000u);
  }
  int local = 0;
  EXPECT_MEMAREA_ERROR(lookup(&local), errc::not_found);
  EXPECT_FALSE(find(&local).has_value());
  void* base = nullptr;
  EXPECT_STATUS(memarea_mem_get_address_range(&base, nullptr, &local), MEMAREA_ERROR_NOT_FOUND);
  EXPECT_STATUS(memarea_mem_get_address_range(nullptr, nullptr, &local),
                MEMAREA_ERROR_INVALID_VALUE);
  // The C lookup's failures (its success skips c_call's frame; its failures do not).
  memarea_allocation_info c;
  EXPECT_STATUS(memarea_pointer_get_info(&c, &local), MEMAREA_ERROR_NOT_FOUND);
  EXPECT_EQ(std::string(memarea_last_error_message()).rfind("memarea_pointer_get_info: ", 0), 0u)
      << memarea_last_error_message();
  EXPECT_STATUS(memarea_pointer_get_info(nullptr, &local), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_NE(std::string(memarea_last_error_message()).find("info is NULL"), std::string::npos)
      << memarea_last_error_message();
}

TEST(Copy, RangesPastTheirAllocationAreRefused) {
  MEMAREA_REQUIRE_DEVICES(1);
  buffer b = area(0).allocate(100);
  std::vector<unsigned char> host(200);
  EXPECT_MEMAREA_ERROR(copy(b.data(), host.data(), 101), errc::invalid_value);
  EXPECT_MEMAREA_ERROR(copy(host.data(), static_cast<char*>(b.data()) + 50, 51),
                       errc::invalid_value);
  EXPECT_MEMAREA_ERROR(copy(nullptr, host.data(), 1), errc::invalid_value);
  EXPECT_STATUS(memarea_memcpy(b.data(), nullptr, 4), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(std::string(memarea_last_error_message()).rfind("memarea_memcpy: ", 0), 0u)
      << memarea_last_error_message();
  EXPECT_STATUS(memarea_memcpy_async(b.data(), host.data(), 101, nullptr),
                MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(std::string(memarea_last_error_message()).rfind("memarea_memcpy_async: ", 0), 0u)
      << memarea_last_error_message();
  EXPECT_STATUS(memarea_memcpy(b.data(), host.data(), 0), MEMAREA_SUCCESS);
  // Unaligned offsets inside the allocation work.
  auto in = random_bytes(61);
  copy(static_cast<char*>(b.data()) + 39, in.data(), 61);
  std::vector<unsigned char> out(61);
  EXPECT_STATUS(memarea_memcpy(out.data(), static_cast<char*>(b.data()) + 39, 61),
                MEMAREA_SUCCESS);
  EXPECT_EQ(in, out);
}

TEST(AreaConcurrency, EightThreadsAllocateFreeAndLookUp) {
  MEMAREA_REQUIRE_DEVICES(1);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t, &failures] {
      const int n = device_count();
      const area a(t % n, t % 2 ? area_flags::host : area_flags::device_only);
      for (int i = 0; i < 100; ++i) {
        const std::size_t size = 64 + 8 * static_cast<std::size_t>(i + t);
        void* p = a.mmap(size);
        auto info = find(static_cast<char*>(p) + size - 1);
        if (!info || info->base != p) ++failures;
        auto in = random_bytes(size);
        std::vector<unsigned char> out(size);
        copy(p, in.data(), size);
        copy(out.data(), p, size);
        if (in != out) ++failures;
        a.munmap(p, size);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// --- C API ---------------------------------------------------------------------------------

TEST(AreaC, CreateMmapMunmapAndErrors) {
  memarea_area_t a = nullptr;
  if (devices() == 0) {
    EXPECT_STATUS(memarea_area_create(&a, 0, 0), MEMAREA_ERROR_NO_DEVICE);
    return;
  }
  EXPECT_STATUS(memarea_area_create(&a, devices(), 0), MEMAREA_ERROR_INVALID_DEVICE);
  EXPECT_STATUS(memarea_area_create(&a, 0, 0x20), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_area_create(nullptr, 0, 0), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_area_create(&a, -1, MEMAREA_AREA_HOST | MEMAREA_AREA_GLOBAL),
                MEMAREA_SUCCESS);
  void* p = nullptr;
  EXPECT_STATUS(memarea_area_mmap(a, &p, 0, nullptr), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_EQ(p, nullptr);
  memarea_mmap_options o = MEMAREA_MMAP_OPTIONS_INIT;
  o.device = devices() - 1;
  EXPECT_STATUS(memarea_area_mmap(a, &p, 333, &o), MEMAREA_SUCCESS);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(lookup(p).kind, memory_kind::host_pinned);
  EXPECT_STATUS(memarea_area_munmap(a, p, 332), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_area_munmap(a, p, 333), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_area_munmap(a, p, 333), MEMAREA_ERROR_INVALID_VALUE);
  EXPECT_STATUS(memarea_area_destroy(a), MEMAREA_SUCCESS);
  EXPECT_STATUS(memarea_area_destroy(nullptr), MEMAREA_ERROR_INVALID_VALUE);
  void* dp = nullptr;
  int local;
  EXPECT_STATUS(memarea_host_get_device_pointer(&dp, &local), MEMAREA_ERROR_INVALID_VALUE);
}

// --- AML-compatible API --------------------------------------------------------------------

TEST(AmlArea, CreateErrorsAsSeed004Documents) {
  struct aml_area* a = nullptr;
  EXPECT_EQ(aml_area_hip_create(&a, devices(), AML_AREA_HIP_FLAG_DEFAULT), -AML_EINVAL);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(aml_area_hip_create(&a, -1, 0x40), -AML_EINVAL);
  EXPECT_EQ(aml_area_cuda_create(&a, devices() + 3, 0), -AML_EINVAL);
  EXPECT_EQ(aml_area_hip_create(&a, -1, AML_AREA_HIP_FLAG_ALLOC_HOST), AML_SUCCESS);
  ASSERT_NE(a, nullptr);
  aml_area_hip_destroy(&a);
  EXPECT_EQ(a, nullptr);
  aml_area_hip_destroy(&a);  // harmless on NULL
  EXPECT_STREQ(aml_strerror(AML_EINVAL), aml_strerror(-AML_EINVAL));
  EXPECT_STREQ(aml_strerror(99), "Unknown error");
}

TEST(AmlArea, MmapMunmapEveryFlagAndErrno) {
  if (devices() == 0) {
    aml_errno = AML_SUCCESS;
    EXPECT_EQ(aml_area_mmap(&aml_area_hip, 64, nullptr), nullptr);
    EXPECT_EQ(aml_errno, AML_ENOTSUP);
    return;
  }
  for (int flags = 0; flags <= 15; ++flags) {
    SCOPED_TRACE(flags);
    for (bool hip : {true, false}) {
      struct aml_area* a = nullptr;
      ASSERT_EQ(hip ? aml_area_hip_create(&a, 0, flags) : aml_area_cuda_create(&a, 0, flags),
                AML_SUCCESS);
      host_block range(5000);
      aml_area_hip_mmap_options o{0, needs_host_range(static_cast<unsigned>(flags)) ? range.ptr
                                                                                   : nullptr};
      void* p = aml_area_mmap(a, 5000, reinterpret_cast<aml_area_mmap_options*>(&o));
      if ((flags & AML_AREA_HIP_FLAG_ALLOC_UNIFIED) && !has_managed()) {
        EXPECT_EQ(p, nullptr);
        EXPECT_EQ(aml_errno, AML_ENOTSUP);
        hip ? aml_area_hip_destroy(&a) : aml_area_cuda_destroy(&a);
        continue;
      }
      ASSERT_NE(p, nullptr) << aml_strerror(aml_errno);
      auto in = random_bytes(5000);
      std::vector<unsigned char> out(5000);
      copy(p, in.data(), 5000);
      copy(out.data(), p, 5000);
      EXPECT_EQ(in, out);
      EXPECT_EQ(aml_area_munmap(a, p, 5000), AML_SUCCESS);
      EXPECT_EQ(aml_area_munmap(a, p, 5000), -AML_EINVAL);
      hip ? aml_area_hip_destroy(&a) : aml_area_cuda_destroy(&a);
    }
  }
  // MAPPED without HOST and without a pointer: NULL, aml_errno AML_EINVAL (positive).
  struct aml_area* m = nullptr;
  ASSERT_EQ(aml_area_hip_create(&m, 0, AML_AREA_HIP_FLAG_ALLOC_MAPPED), AML_SUCCESS);
  aml_errno = AML_SUCCESS;
  EXPECT_EQ(aml_area_mmap(m, 64, nullptr), nullptr);
  EXPECT_EQ(aml_errno, AML_EINVAL);
  aml_area_hip_destroy(&m);
  // Out of memory.
  aml_errno = AML_SUCCESS;
  const auto total = get_device_properties(0).total_memory;
  EXPECT_EQ(aml_area_mmap(&aml_area_hip, total + (std::size_t{1} << 30), nullptr), nullptr);
  EXPECT_EQ(aml_errno, AML_ENOMEM);
  // Size 0: NULL with aml_errno untouched, and unmapping NULL or 0 bytes succeeds (as AML).
  aml_errno = AML_EPERM;
  EXPECT_EQ(aml_area_mmap(&aml_area_cuda, 0, nullptr), nullptr);
  EXPECT_EQ(aml_errno, AML_EPERM);
  EXPECT_EQ(aml_area_munmap(&aml_area_cuda, nullptr, 64), AML_SUCCESS);
  int local;
  EXPECT_EQ(aml_area_munmap(&aml_area_cuda, &local, 0), AML_SUCCESS);
  EXPECT_EQ(aml_area_munmap(&aml_area_hip, &local, 4), -AML_EINVAL);
  EXPECT_EQ(aml_area_mmap(nullptr, 64, nullptr), nullptr);
  EXPECT_EQ(aml_area_munmap(nullptr, &local, 4), -AML_EINVAL);
}

TEST(AmlArea, DefaultAreasAndTheOptionDeviceRule) {
  MEMAREA_REQUIRE_DEVICES(1);
  const int last = devices() - 1;
  set_device(last);
  void* p = aml_area_mmap(&aml_area_hip, 256, nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(lookup(p).device, last);
  EXPECT_EQ(lookup(p).kind, memory_kind::device);
  EXPECT_EQ(aml_area_munmap(&aml_area_hip, p, 256), AML_SUCCESS);
  void* u = aml_area_mmap(&aml_area_cuda_unified, 256, nullptr);
  if (has_managed(last)) {
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(lookup(u).kind, memory_kind::managed);
    EXPECT_EQ(aml_area_munmap(&aml_area_cuda_unified, u, 256), AML_SUCCESS);
  } else {
    EXPECT_EQ(u, nullptr);
    EXPECT_EQ(aml_errno, AML_ENOTSUP);
  }
  // The option's device selects when >= 0 (as AML documents it; AML itself ignores 0), and
  // < 0 means "the area's device".
  aml_area_hip_mmap_options zero{0, nullptr};
  p = aml_area_mmap(&aml_area_hip, 64, reinterpret_cast<aml_area_mmap_options*>(&zero));
  EXPECT_EQ(lookup(p).device, 0);
  EXPECT_EQ(aml_area_munmap(&aml_area_hip, p, 64), AML_SUCCESS);
  aml_area_hip_mmap_options none{-1, nullptr};
  p = aml_area_mmap(&aml_area_hip, 64, reinterpret_cast<aml_area_mmap_options*>(&none));
  EXPECT_EQ(lookup(p).device, last);
  EXPECT_EQ(aml_area_munmap(&aml_area_hip, p, 64), AML_SUCCESS);
  if (devices() > 1) {
    aml_area_hip_mmap_options one{1, nullptr};
    set_device(0);
    p = aml_area_mmap(&aml_area_hip, 64, reinterpret_cast<aml_area_mmap_options*>(&one));
    EXPECT_EQ(lookup(p).device, 1);
    EXPECT_EQ(get_device(), 0) << "the previous device is restored, unlike AML";
    EXPECT_EQ(aml_area_munmap(&aml_area_hip, p, 64), AML_SUCCESS);
  }
  set_device(0);
  char text[512] = {0};
  FILE* f = fmemopen(text, sizeof text - 1, "w");
  EXPECT_EQ(aml_area_fprintf(f, "x", &aml_area_hip), AML_SUCCESS);
  std::fclose(f);
  EXPECT_NE(std::string(text).find("device: -1"), std::string::npos) << text;
}
