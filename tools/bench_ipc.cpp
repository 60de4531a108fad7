// Issue 5's benchmark: a cached IPC import vs the driver's open of the same handle (re-open
// after close), and a repeated export vs the runtime's and the driver's get-handle. Importing
// needs another process: the bench re-executes this binary as a child exporter
// (MEMAREA_BENCH_IPC_EXPORTER set; the static hook below runs it before main and exits).
#include "core/ipc_impl.hpp"
#include "core/system.hpp"
#include "tools/bench.hpp"
#include "tools/raw_cuda.hpp"
#include "tools/raw_cudart.hpp"

#include <memarea/area.hpp>
#include <memarea/ipc.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace memarea::cli::bench {
namespace {

constexpr const char* kExporterEnv = "MEMAREA_BENCH_IPC_EXPORTER";
constexpr std::size_t kBytes = std::size_t{1} << 20;
constexpr int kExportBatch = 100;  ///< exports per timed sample

/// The child: export one buffer, print its handle, live until stdin closes.
struct exporter_hook {
  exporter_hook() {
    if (!std::getenv(kExporterEnv)) return;
    int rc = 0;
    try {
      buffer b = area(0).allocate(kBytes);
      std::printf("%s\n", ipc::export_handle(b.data()).to_hex().c_str());
      std::fflush(stdout);
      char c;
      while (::read(0, &c, 1) > 0) {
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench ipc exporter: %s\n", e.what());
      rc = 1;
    }
    std::exit(rc);
  }
};
const exporter_hook hook;

/// Median of reps timings of `timed` (microseconds), running `untimed` after each.
template <class T, class U>
double median_split_us(int reps, T&& timed, U&& untimed) {
  std::vector<double> t;
  timed();
  untimed();
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    timed();
    auto b = std::chrono::steady_clock::now();
    untimed();
    t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  return median(std::move(t));
}

/// Median over reps samples of the time of one call of fn, each sample timing `batch` calls:
/// for calls of tens of nanoseconds, which one clock read would otherwise dominate.
template <class F>
double median_batched_us(int reps, int batch, F&& fn) {
  return median_us(reps, [&] {
           for (int i = 0; i < batch; ++i) fn();
         }) /
         batch;
}

/// A child exporter process.
class exporter {
 public:
  exporter() {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
      throw error(errc::unknown, "bench ipc: pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      setenv(kExporterEnv, "1", 1);
      char self[] = "memarea";
      char* argv[] = {self, nullptr};
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    FILE* f = fdopen(out[0], "r");
    char buf[512] = {0};
    if (!f || !fgets(buf, sizeof buf, f)) {
      if (f) fclose(f);
      throw error(errc::unknown, "bench ipc: the child exporter printed no handle");
    }
    fclose(f);
    std::string hex(buf);
    while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
    handle = ipc::handle::from_hex(hex);
  }
  ~exporter() {
    ::close(to_);
    int st;
    waitpid(pid_, &st, 0);
  }
  ipc::handle handle;

 private:
  pid_t pid_ = -1;
  int to_ = -1;
};

void ipc_bench(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench ipc: no devices, no rows\n";
    return;
  }
  auto& gpu = detail::system::get().gpu();
  const int reps = std::max(ctx.repetitions, 50);

  // --- import: cached memarea open vs the driver's re-open after close ---
  {
    exporter child;
    const auto native = detail::ipc_internal::native_of(child.handle);
    std::string raw_name = "driver layer ipc_open_handle";
    double raw = 0;
    // The raw baseline runs first, while memarea holds no mapping of this handle (a second
    // open in one context would only bump the driver's reference count).
#ifdef MEMAREA_HAVE_CUDA
    if (auto* cu = raw_cuda()) {
      raw_name = "cuIpcOpenMemHandle (re-open after close)";
      raw_cuda_use_device(*cu, 0);
      CUipcMemHandle h;
      std::memcpy(&h, native.bytes, sizeof h);
      CUdeviceptr d = 0;
      raw = median_split_us(
          reps,
          [&] {
            if (cu->IpcOpenMemHandle(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS)
              throw error(errc::unknown, "raw cuIpcOpenMemHandle failed");
          },
          [&] { cu->IpcCloseMemHandle(d); });
    }
#endif
    if (raw == 0) {
      void* p = nullptr;
      raw = median_split_us(
          reps,
          [&] { detail::check(gpu.ipc_open_handle(0, native, 0, &p), "raw ipc open"); },
          [&] { detail::check(gpu.ipc_close_handle(p), "raw ipc close"); });
    }
    void* p = nullptr;
    const double mem = median_split_us(
        reps, [&] { p = ipc::open(child.handle, 0); }, [&] { ipc::close(p); });
    row r;
    r.group = "ipc import";
    r.variant = "1 MiB, cached re-open";
    r.unit = "us";
    r.memarea = mem;
    r.raw = raw;
    r.raw_name = raw_name;
    if (raw_name.rfind("cu", 0) == 0) {
      r.target = ">= 30x faster";
      r.met = mem * 30 <= raw;
    } else {
      r.note = "the target is against CUDA; this backend's driver layer is a table lookup";
    }
    ctx.add(r);
  }

  // --- export: a repeated memarea export vs three comparators (docs/ipc.md): the runtime's
  // cudaIpcGetMemHandle repeated (the target), the driver's cuIpcGetMemHandle repeated
  // (which caches too), and the driver's first call on a fresh allocation ---
  {
    buffer b = area(0).allocate(kBytes);
    volatile unsigned char sink = 0;
    const double mem = median_batched_us(
        reps, kExportBatch, [&] { sink = ipc::export_handle(b.data()).bytes[0]; });
    (void)sink;
    auto export_row = [&](const char* variant, double raw, std::string raw_name) {
      row r;
      r.group = "ipc export";
      r.variant = variant;
      r.unit = "us";
      r.memarea = mem;
      r.raw = raw;
      r.raw_name = std::move(raw_name);
      return r;
    };
    const bool on_cuda = backend_name() == "cuda";
    if (!on_cuda)
      std::cerr << "bench ipc: no cudaIpcGetMemHandle row: the active backend is "
                << backend_name() << ", not cuda\n";
#ifdef MEMAREA_HAVE_CUDA
    if (auto* cu = on_cuda ? raw_cuda() : nullptr) {
      std::string why;
      if (auto* rt = raw_cudart(&why)) {
        cudart_ipc_handle h;
        int err = rt->SetDevice(0);
        if (err == 0) err = rt->IpcGetMemHandle(&h, b.data());  // the runtime's set-up, untimed
        if (err == 0) {
          const double raw = median_batched_us(reps, kExportBatch, [&] {
            if (rt->IpcGetMemHandle(&h, b.data()) != 0)
              throw error(errc::unknown, "raw cudaIpcGetMemHandle failed");
          });
          row r = export_row("1 MiB, repeated", raw,
                             "cudaIpcGetMemHandle (runtime, repeated; " + rt->path + ")");
          r.target = ">= 10x faster";
          r.met = mem * 10 <= raw;
          ctx.add(r);
        } else {
          std::cerr << "bench ipc: no cudaIpcGetMemHandle row: " << rt->path
                    << " returned cudaError " << err << "\n";
        }
      } else {
        std::cerr << "bench ipc: no cudaIpcGetMemHandle row: " << why << "\n";
      }

      raw_cuda_use_device(*cu, 0);
      CUipcMemHandle h;
      const double raw = median_batched_us(reps, kExportBatch, [&] {
        if (cu->IpcGetMemHandle(&h, reinterpret_cast<CUdeviceptr>(b.data())) != CUDA_SUCCESS)
          throw error(errc::unknown, "raw cuIpcGetMemHandle failed");
      });
      row d = export_row("1 MiB, repeated (driver)", raw, "cuIpcGetMemHandle (driver, repeated)");
      d.target = "not slower";
      d.met = mem <= raw;
      d.note = "the issue's 10x is against the runtime's call; the driver caches its handle too";
      ctx.add(d);

      // The driver's first call on an allocation is its expensive one: measured on fresh
      // allocations (allocation and free untimed).
      CUdeviceptr p = 0;
      if (cu->MemAlloc(&p, kBytes) != CUDA_SUCCESS) throw error(errc::out_of_memory, "raw");
      const double first = median_split_us(
          std::min(reps, 100),
          [&] {
            if (cu->IpcGetMemHandle(&h, p) != CUDA_SUCCESS)
              throw error(errc::unknown, "raw cuIpcGetMemHandle failed");
          },
          [&] {
            cu->MemFree(p);
            if (cu->MemAlloc(&p, kBytes) != CUDA_SUCCESS) throw error(errc::out_of_memory, "raw");
          });
      cu->MemFree(p);
      row f = export_row("1 MiB, repeated vs first", first,
                         "cuIpcGetMemHandle, first call on a fresh allocation");
      f.target = ">= 10x faster";
      f.met = mem * 10 <= first;
      ctx.add(f);
      return;
    }
#endif
    detail::ipc_native_handle h;
    const double raw = median_batched_us(
        reps, kExportBatch, [&] { detail::check(gpu.ipc_get_handle(b.data(), &h), "raw"); });
    row r = export_row("1 MiB, repeated", raw, "driver layer ipc_get_handle");
    r.note = "the target is against CUDA; this backend's driver layer is a table lookup";
    ctx.add(r);
  }
}

const registrar reg("ipc", ipc_bench);

}  // namespace
}  // namespace memarea::cli::bench
