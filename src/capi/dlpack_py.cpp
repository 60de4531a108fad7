// memarea_dlpack_capsule_destructor (memarea.h): the destructor of the DLPack capsules the
// Python package makes. It is native because a consumer may drop a capsule it did not consume
// with its own error set (NumPy 1.24 does, refusing a device): a Python (ctypes) destructor
// cannot run then without losing that error, and so the deleter, which gives the exporting
// Buffer back, would never run. The Python C API is looked up in the running process, so that
// libmemarea needs no Python to link or load.
#include <memarea/memarea.h>

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>

namespace {

// The DLPack ABI (dlpack.h, v1), as far as the deleters.
struct dl_tensor {
  void* data;
  std::int32_t device_type, device_id;
  std::int32_t ndim;
  std::uint8_t code, bits;
  std::uint16_t lanes;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct dl_managed_tensor {
  dl_tensor tensor;
  void* manager_ctx;
  void (*deleter)(dl_managed_tensor*);
};
struct dl_managed_tensor_versioned {
  std::uint32_t major, minor;
  void* manager_ctx;
  void (*deleter)(dl_managed_tensor_versioned*);
  std::uint64_t flags;
  dl_tensor tensor;
};
static_assert(offsetof(dl_managed_tensor, deleter) == 56);
static_assert(offsetof(dl_managed_tensor_versioned, deleter) == 16);

/// The few Python C API functions it calls (all null when the process has no Python).
struct python_api {
  void (*fetch)(void**, void**, void**) = nullptr;   // PyErr_Fetch
  void (*restore)(void*, void*, void*) = nullptr;    // PyErr_Restore
  int (*is_valid)(void*, const char*) = nullptr;     // PyCapsule_IsValid
  void* (*get_pointer)(void*, const char*) = nullptr;  // PyCapsule_GetPointer

  bool complete() const noexcept { return fetch && restore && is_valid && get_pointer; }
};

template <class F>
void find(F& f, const char* name) noexcept {
  f = reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

const python_api& python() noexcept {
  static const python_api api = [] {
    python_api a;
    find(a.fetch, "PyErr_Fetch");
    find(a.restore, "PyErr_Restore");
    find(a.is_valid, "PyCapsule_IsValid");
    find(a.get_pointer, "PyCapsule_GetPointer");
    return a;
  }();
  return api;
}

}  // namespace

extern "C" void memarea_dlpack_capsule_destructor(void* capsule) {
  const python_api& py = python();
  if (!capsule || !py.complete()) return;
  // A consumer renamed what it took ("used_dltensor"): its deleter is the consumer's to call.
  void *type = nullptr, *value = nullptr, *traceback = nullptr;
  py.fetch(&type, &value, &traceback);
  if (py.is_valid(capsule, "dltensor")) {
    auto* m = static_cast<dl_managed_tensor*>(py.get_pointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  } else if (py.is_valid(capsule, "dltensor_versioned")) {
    auto* m =
        static_cast<dl_managed_tensor_versioned*>(py.get_pointer(capsule, "dltensor_versioned"));
    if (m && m->deleter) m->deleter(m);
  }
  py.restore(type, value, traceback);  // the consumer's error, as it was
}
