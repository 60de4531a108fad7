// Experiment (not part of the library): what CUDA's range attributes (cuMemRangeGetAttribute,
// at driver versions 12000 and 12020) answer for managed memory after host-NUMA advice and a
// prefetch to host NUMA node 0. Build on the GPU machine:
//   cc -O2 -isystem /usr/local/cuda/include -o cuda_host_numa_attributes \
//      bench/experiments/cuda_host_numa_attributes.c -ldl
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
typedef CUresult (*gpa_t)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
static gpa_t gpa;
static void* get(const char* n, int v) { void* p = 0; CUdriverProcAddressQueryResult q; gpa(n, &p, v, 0, &q); return p; }
int main(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  gpa = (gpa_t)dlsym(lib, "cuGetProcAddress_v2");
  CUresult (*Init)(unsigned) = get("cuInit", 12000);
  CUresult (*DevGet)(CUdevice*, int) = get("cuDeviceGet", 12000);
  CUresult (*Retain)(CUcontext*, CUdevice) = get("cuDevicePrimaryCtxRetain", 12000);
  CUresult (*SetCur)(CUcontext) = get("cuCtxSetCurrent", 12000);
  CUresult (*Alloc)(CUdeviceptr*, size_t, unsigned) = get("cuMemAllocManaged", 12000);
  CUresult (*Advise)(CUdeviceptr, size_t, CUmem_advise, CUmemLocation) = get("cuMemAdvise", 12020);
  CUresult (*Prefetch)(CUdeviceptr, size_t, CUmemLocation, unsigned, CUstream) = get("cuMemPrefetchAsync", 12020);
  CUresult (*Sync)(void) = get("cuCtxSynchronize", 12000);
  for (int ver = 12000; ver <= 13000; ver += 1000 - (ver == 12000 ? 980 : 0)) {
    CUresult (*Attr)(void*, size_t, CUmem_range_attribute, CUdeviceptr, size_t) = get("cuMemRangeGetAttribute", ver);
    printf("cuMemRangeGetAttribute at version %d: %p\n", ver, (void*)Attr);
  }
  CUresult (*Attr)(void*, size_t, CUmem_range_attribute, CUdeviceptr, size_t) = get("cuMemRangeGetAttribute", 12000);
  CUresult (*Attr2)(void*, size_t, CUmem_range_attribute, CUdeviceptr, size_t) = get("cuMemRangeGetAttribute", 12020);
  printf("init %d\n", Init(0));
  CUdevice d; CUcontext c; DevGet(&d, 0); Retain(&c, d); SetCur(c);
  CUdeviceptr p; printf("alloc %d\n", Alloc(&p, 8192, CU_MEM_ATTACH_GLOBAL));
  CUmemLocation l = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
  printf("advise host numa 0: %d\n", Advise(p, 8192, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, l));
  for (int a = 1; a <= 8; ++a) {
    int v = 12345; CUresult r = Attr(&v, 4, (CUmem_range_attribute)a, p, 8192);
    int v2 = 12345; CUresult r2 = Attr2 ? Attr2(&v2, 4, (CUmem_range_attribute)a, p, 8192) : -1;
    printf("after advise: attr %d -> r %d v %d | v12020 r %d v %d\n", a, r, v, r2, v2);
  }
  printf("prefetch host numa 0: %d sync %d\n", Prefetch(p, 8192, l, 0, 0), Sync());
  for (int a = 1; a <= 8; ++a) {
    int v = 12345; CUresult r = Attr(&v, 4, (CUmem_range_attribute)a, p, 8192);
    printf("after prefetch: attr %d -> r %d v %d\n", a, r, v);
  }
  CUmemLocation h = {CU_MEM_LOCATION_TYPE_HOST, 0};
  printf("advise host: %d\n", Advise(p, 8192, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, h));
  for (int a = 1; a <= 8; ++a) {
    int v = 12345; CUresult r = Attr(&v, 4, (CUmem_range_attribute)a, p, 8192);
    printf("after advise host: attr %d -> r %d v %d\n", a, r, v);
  }
  return 0;
}
