// Loading libcuda at run time; the table of entry points and versions is in cuda_api.hpp.
//
// Pinned versions (why one binary runs on any CUDA 12.0+ driver, CUDA 13 included):
// - libcuda is dlopen'ed ("libcuda.so.1", fallback "libcuda.so"); only cuGetProcAddress_v2
//   (fallback cuGetProcAddress) is taken with dlsym. Every other entry point comes from
//   cuGetProcAddress with an explicit cudaVersion and CU_GET_PROC_ADDRESS_DEFAULT (legacy default
//   stream, since memarea is not built for per-thread default streams), and is called through
//   the PFN_* typedef of exactly that ABI version (cuda_api.hpp lists each pair).
// - 12000 for almost everything: the oldest driver memarea supports (cuGetProcAddress_v2 appeared
//   there), and an ABI frozen since, so a newer driver still hands back the same signatures.
//   CUDA 13 changed cuCtxGetDevice and cuCtxSynchronize (v13000 take a context argument); pinning
//   12000 keeps the argument-less v2000 forms that act on the current context, which we set.
// - 12020 for cuMemPrefetchAsync and cuMemAdvise: their CUmemLocation forms (_v2, the only forms
//   a CUDA 13 build knows) appeared in 12.2. Loaded only from 12.2 drivers on; else
//   not_supported.
// - 12080 for cuEventElapsedTime when the driver has it (_v2, what a CUDA 13 build calls; same
//   signature as the 12000 one, which older drivers get).
#include "driver/cuda/cuda_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include "driver/cuda/cuda_errors.hpp"

namespace memarea::detail::cuda {

namespace {

/// cuGetProcAddress as found in the library: the CUDA 12 form (with a status out-parameter)
/// or, from a driver that lacks it, the CUDA 11.3 form.
struct proc_address {
  PFN_cuGetProcAddress_v12000 v2 = nullptr;
  PFN_cuGetProcAddress_v11030 v1 = nullptr;

  /// The entry point for `symbol` at ABI `version`, or nullptr. The driver answers success with
  /// a null pointer when it has no ABI-compatible function, so both are checked.
  void* get(const char* symbol, int version) const noexcept {
    void* fn = nullptr;
    CUresult r;
    if (v2) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      r = v2(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
      if (r == CUDA_SUCCESS && status != CU_GET_PROC_ADDRESS_SUCCESS) fn = nullptr;
    } else {
      r = v1(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT);
    }
    return r == CUDA_SUCCESS ? fn : nullptr;
  }
};

/// "13.0" from 13000.
std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

}  // namespace

load_result load(api* out) {
  load_result res;
  api a;

  // RTLD_LOCAL: libcuda's symbols must not satisfy anyone else's lookups. The handle is never
  // closed: primary contexts and the driver's own threads live until the process exits.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    std::string first = e ? e : "unknown dlopen error";
    lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      res.reason = "libcuda.so.1 not found: " + first;
      return res;
    }
  }

  proc_address gpa;
  gpa.v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
  if (!gpa.v2) {
    gpa.v1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(lib, "cuGetProcAddress"));
  }
  if (!gpa.v2 && !gpa.v1) {
    res.reason = "libcuda has no cuGetProcAddress (the driver is older than CUDA 11.3)";
    return res;
  }

  // The version first: asking for an ABI newer than the driver fails, so it decides what to ask.
  a.DriverGetVersion =
      reinterpret_cast<PFN_cuDriverGetVersion_v2020>(gpa.get("cuDriverGetVersion", 2020));
  if (!a.DriverGetVersion || a.DriverGetVersion(&res.driver_version) != CUDA_SUCCESS) {
    res.reason = "cuDriverGetVersion not available in libcuda";
    return res;
  }
  if (res.driver_version < 12000) {
    res.reason = fmt::format("the CUDA driver is {}; memarea needs 12.0 or newer",
                             version_text(res.driver_version));
    return res;
  }

  a.Init = reinterpret_cast<PFN_cuInit_v2000>(gpa.get("cuInit", 12000));
  if (!a.Init) {
    res.reason = "cuInit not found through cuGetProcAddress";
    return res;
  }

#define MEMAREA_CUDA_LOAD_REQUIRED(name, pfn, req)                                           \
  a.name = reinterpret_cast<PFN_cu##name##_v##pfn>(gpa.get("cu" #name, req));                \
  if (!a.name) {                                                                             \
    res.reason = fmt::format("cu" #name " (ABI of CUDA {}) not found in libcuda, driver {}", \
                             version_text(req), version_text(res.driver_version));           \
    return res;                                                                              \
  }
  MEMAREA_CUDA_REQUIRED(MEMAREA_CUDA_LOAD_REQUIRED)
#undef MEMAREA_CUDA_LOAD_REQUIRED

  // cuEventElapsedTime_v2 (12.8) is what a CUDA 13 build calls; same signature as the original.
  if (res.driver_version >= 12080) {
    if (void* fn = gpa.get("cuEventElapsedTime", 12080)) {
      a.EventElapsedTime = reinterpret_cast<PFN_cuEventElapsedTime_v2000>(fn);
    }
  }

#define MEMAREA_CUDA_LOAD_OPTIONAL(name, pfn, req) \
  a.name = reinterpret_cast<PFN_cu##name##_v##pfn>(gpa.get("cu" #name, req));
  if (res.driver_version >= 12020) {
    MEMAREA_CUDA_OPTIONAL(MEMAREA_CUDA_LOAD_OPTIONAL)
  }
  MEMAREA_CUDA_OPTIONAL_ANY(MEMAREA_CUDA_LOAD_OPTIONAL)
#undef MEMAREA_CUDA_LOAD_OPTIONAL

  CUresult r = a.Init(0);
  if (r != CUDA_SUCCESS) {
    const char* text = nullptr;
    if (a.GetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    res.reason = fmt::format("cuInit failed: {}{}", cuda_error_name(r),
                             text ? fmt::format(" ({})", text) : std::string());
    return res;
  }

  *out = a;
  res.ok = true;
  return res;
}

}  // namespace memarea::detail::cuda
