// The experiments' shared loader of libcuda (not part of the library): dlopen, one entry point
// at a time by name, and a check that stops the program on any failure. Each experiment that
// talks to the driver directly includes it (bench/experiments/*.cpp; built with the CUDA
// headers only, -ldl).
#pragma once

#include <cuda.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace libcuda_dl {

/// libcuda.so.1, or exit(2) with dlerror's words.
inline void* open() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    std::fprintf(stderr, "no libcuda.so.1: %s\n", dlerror());
    std::exit(2);
  }
  return lib;
}

/// f = the entry point `name` of lib, or exit(2).
template <class F>
void load(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) {
    std::fprintf(stderr, "no %s in libcuda\n", name);
    std::exit(2);
  }
}

/// exit(3) with the call's name and code unless r is CUDA_SUCCESS.
inline void ok(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "%s failed: %d\n", what, static_cast<int>(r));
    std::exit(3);
  }
}

}  // namespace libcuda_dl
