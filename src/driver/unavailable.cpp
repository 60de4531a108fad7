#include "driver/unavailable.hpp"

#include "driver/backends.hpp"

namespace memarea::detail {
namespace {

class unavailable_driver final : public driver {
 public:
  unavailable_driver(const char* name, std::string reason, errc code)
      : name_(name), reason_(std::move(reason)), code_(code) {}

  const char* name() const noexcept override { return name_; }
  std::string unavailable_reason() const override { return reason_; }
  std::string version() const override { return ""; }
  int device_count() const noexcept override { return 0; }
  bool survives_fork() const noexcept override { return true; }  // nothing to inherit

  dstatus get_current_device(int* device) override {
    if (device) *device = 0;
    return fail();
  }
  dstatus get_properties(int, memarea_device_properties*) override { return fail(); }
  dstatus mem_get_info(int, size_t*, size_t*) override { return fail(); }
  dstatus set_current_device(int) override { return fail(); }
  dstatus malloc_device(int, size_t, void**) override { return fail(); }
  dstatus free_device(void*) override { return fail(); }
  dstatus malloc_host(int, size_t, unsigned, void**) override { return fail(); }
  dstatus free_host(void*) override { return fail(); }
  dstatus host_register(int, void*, size_t, unsigned) override { return fail(); }
  dstatus host_unregister(void*) override { return fail(); }
  dstatus host_get_device_pointer(void**, void*) override { return fail(); }
  dstatus malloc_managed(int, size_t, unsigned, void**) override { return fail(); }
  dstatus free_managed(void*) override { return fail(); }
  dstatus pointer_query(const void*, pointer_info*) override {
    return dstatus{errc::not_found, 0, "", "no GPU backend knows this pointer"};
  }
  dstatus address_range(const void*, void**, size_t*) override {
    return dstatus{errc::not_found, 0, "", "no GPU backend knows this pointer"};
  }
  dstatus can_access_peer(int, int, int*) override { return fail(); }
  dstatus enable_peer_access(int, int, unsigned) override { return fail(); }
  dstatus disable_peer_access(int, int) override { return fail(); }
  dstatus get_p2p_attribute(memarea_p2p_attribute, int, int, int*) override { return fail(); }
  dstatus memcpy_async(void*, const void*, size_t, int, native_stream) override { return fail(); }
  dstatus memcpy_sync(void*, const void*, size_t, int, native_stream) override { return fail(); }
  dstatus memcpy_peer_async(void*, int, const void*, int, size_t, int, native_stream) override { return fail(); }
  dstatus memset_async(void*, int, size_t, int, native_stream) override { return fail(); }
  dstatus memset_elements_async(void*, std::uint32_t, size_t, unsigned, int, native_stream) override { return fail(); }
  dstatus memcpy_2d_async(const copy_2d_params&, int, native_stream) override { return fail(); }
  dstatus stream_create(int, native_stream*) override { return fail(); }
  dstatus stream_destroy(int, native_stream) override { return fail(); }
  dstatus stream_synchronize(int, native_stream) override { return fail(); }
  dstatus stream_query(int, native_stream) override { return fail(); }
  dstatus stream_get_device(native_stream, int*) override { return fail(); }
  dstatus event_create(int, native_event*, event_timing, event_sync) override { return fail(); }
  dstatus event_destroy(int, native_event) override { return fail(); }
  dstatus event_record(native_event, int, native_stream) override { return fail(); }
  dstatus stream_wait_event(int, native_stream, native_event) override { return fail(); }
  dstatus event_synchronize(native_event) override { return fail(); }
  dstatus event_query(native_event) override { return fail(); }
  dstatus event_elapsed_ms(float*, native_event, native_event) override { return fail(); }
  dstatus device_synchronize(int) override { return fail(); }
  dstatus device_reset(int) override { return fail(); }
  dstatus ipc_get_handle(void*, ipc_native_handle*) override { return fail(); }
  dstatus ipc_open_handle(int, const ipc_native_handle&, unsigned, void**) override { return fail(); }
  dstatus ipc_close_handle(void*) override { return fail(); }
  dstatus shareable_create(int, size_t, shareable_allocation*) override { return fail(); }
  dstatus shareable_export_fd(const shareable_allocation&, int*) override { return fail(); }
  dstatus shareable_import_fd(int, int, size_t, shareable_allocation*) override { return fail(); }
  dstatus shareable_release(const shareable_allocation&) override { return fail(); }
  dstatus mem_prefetch_async(const void*, size_t, location, int, native_stream) override { return fail(); }
  dstatus mem_advise(const void*, size_t, memarea_mem_advice, location) override { return fail(); }
  dstatus mem_range_get_attribute(void*, size_t, memarea_mem_range_attribute, const void*, size_t) override { return fail(); }
  dstatus stream_attach_mem_async(int, native_stream, void*, size_t, unsigned) override { return fail(); }

 private:
  dstatus fail() const { return dstatus{code_, 0, "", reason_}; }
  const char* name_;
  std::string reason_;
  errc code_;
};

}  // namespace

std::unique_ptr<driver> make_unavailable_driver(const char* name, std::string reason, errc code) {
  return std::make_unique<unavailable_driver>(name, std::move(reason), code);
}

#ifndef MEMAREA_HAVE_CUDA
std::unique_ptr<driver> make_cuda_driver() {
  return make_unavailable_driver("cuda", "memarea was built without the CUDA headers (cuda.h)",
                                 errc::not_supported);
}
#endif
#ifndef MEMAREA_HAVE_HIP
std::unique_ptr<driver> make_hip_driver() {
  return make_unavailable_driver("hip", "memarea was built without the HIP headers",
                                 errc::not_supported);
}
#endif

}  // namespace memarea::detail
