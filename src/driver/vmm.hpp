// Shareable memory through a vendor's virtual memory management (CUDA's cuMem*, HIP's hipMem*),
// written once. Both vendors make, map, share and free such memory with the same steps in the
// same order; only the calls differ. So the steps live here, over a small object of the
// vendor's calls, and the CUDA and HIP backends keep only what is theirs (entering the device,
// whether the device can do it at all, the layout of the allocation's properties).
#pragma once

#include "driver/driver.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace memarea::detail {

/// What a vendor gives the sequence: each call returns the vendor's status translated.
///   using handle = ...;  the vendor's allocation handle, kept in shareable_allocation::opaque[0]
///   granularity(device, &g)           minimum granularity of a new allocation on device
///   create(device, size, &h)          a new allocation of size bytes on device (fd-exportable)
///   import(fd, &h)                    the allocation an exported descriptor names
///   import_granularity(h, device, &g) the granularity that maps h
///   export_fd(h, &fd)                 a new descriptor for h
///   reserve(size, alignment, &addr) / free_address(addr, size)
///   map(addr, size, h) / unmap(addr, size)
///   set_access(addr, size, devices, n) read-write access for n device ordinals
///   release(h)                        drops the handle (the memory goes with its last mapping)
///   device_count(), can_reach(from, to): whether `from` can access `to`'s memory as a peer
///   to_opaque(h), from_opaque(word)
template <class Vendor>
class vmm_sequence {
 public:
  explicit vmm_sequence(const Vendor& v) : v_(v) {}

  /// Allocates size bytes (rounded up to the granularity), maps them and grants access.
  dstatus create(int device, size_t size, shareable_allocation* out) const {
    size_t granularity = 0;
    if (auto s = v_.granularity(device, &granularity); !s.ok()) return s;
    size_t rounded = 0;
    if (auto s = round(size, granularity, &rounded); !s.ok()) return s;
    typename Vendor::handle h{};
    if (auto s = v_.create(device, rounded, &h); !s.ok()) return s;
    return adopt(h, rounded, granularity, device, out);
  }

  /// Maps the allocation `fd` names (size as exported) on `device`; fd stays the caller's.
  dstatus import_fd(int device, int fd, size_t size, shareable_allocation* out) const {
    typename Vendor::handle h{};
    if (auto s = v_.import(fd, &h); !s.ok()) return s;
    size_t granularity = 0;
    size_t rounded = 0;
    dstatus s = v_.import_granularity(h, device, &granularity);
    if (s.ok()) s = round(size, granularity, &rounded);
    if (!s.ok()) {
      (void)v_.release(h);
      return s;
    }
    return adopt(h, rounded, granularity, device, out);
  }

  dstatus export_fd(const shareable_allocation& a, int* fd) const {
    return v_.export_fd(Vendor::from_opaque(a.opaque[0]), fd);
  }

  /// Unmap, free the addresses, drop the handle. A failed unmap (a bad argument) changes
  /// nothing, so the caller may try again with the memory still whole; after it every step
  /// runs and the first failure is reported.
  dstatus release(const shareable_allocation& a) const {
    if (auto s = v_.unmap(a.ptr, a.size); !s.ok()) return s;
    dstatus first = v_.free_address(a.ptr, a.size);
    dstatus s = v_.release(Vendor::from_opaque(a.opaque[0]));
    if (first.ok()) first = s;
    return first;
  }

 private:
  /// size rounded up to a multiple of granularity (0: the vendor named none, size stays).
  static dstatus round(size_t size, size_t granularity, size_t* out) {
    if (granularity == 0) {
      *out = size;
      return {};
    }
    if (size > SIZE_MAX - (granularity - 1)) {
      dstatus s;
      s.code = errc::out_of_memory;  // as any allocation of a size no address space holds
      s.detail = "shareable memory: the size overflows when rounded to the granularity";
      return s;
    }
    *out = (size + granularity - 1) / granularity * granularity;
    return {};
  }

  /// Maps h and fills *out; on failure drops h (the allocation was the caller's to give).
  dstatus adopt(typename Vendor::handle h, size_t size, size_t alignment, int device,
                shareable_allocation* out) const {
    void* ptr = nullptr;
    if (auto s = map(h, size, alignment, device, &ptr); !s.ok()) {
      (void)v_.release(h);
      return s;
    }
    shareable_allocation a;
    a.ptr = ptr;
    a.size = size;
    a.device = device;
    a.opaque[0] = Vendor::to_opaque(h);
    *out = a;
    return {};
  }

  /// Reserves addresses, maps h there and grants read-write access to `device` and to every
  /// device that can reach it as a peer. Undoes its own steps on failure.
  dstatus map(typename Vendor::handle h, size_t size, size_t alignment, int device,
              void** ptr) const {
    void* addr = nullptr;
    if (auto s = v_.reserve(size, alignment, &addr); !s.ok()) return s;
    if (auto s = v_.map(addr, size, h); !s.ok()) {
      (void)v_.free_address(addr, size);
      return s;
    }
    std::vector<int> who{device};
    for (int d = 0; d < v_.device_count(); ++d) {
      if (d != device && v_.can_reach(d, device)) who.push_back(d);
    }
    dstatus s = v_.set_access(addr, size, who.data(), who.size());
    // Peers are a bonus (an imported allocation may live where they cannot reach): the device
    // itself is what the caller asked for.
    if (!s.ok() && who.size() > 1) s = v_.set_access(addr, size, who.data(), 1);
    if (!s.ok()) {
      (void)v_.unmap(addr, size);
      (void)v_.free_address(addr, size);
      return s;
    }
    *ptr = addr;
    return {};
  }

  const Vendor& v_;
};

}  // namespace memarea::detail
