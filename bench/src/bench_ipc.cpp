// `memarea-bench --filter ipc`: what users feel, side by side with what they would
// do instead, in one run.
//
// - cold: the first export, and the first import, in a fresh process (both libraries made
//   ready first: memarea has allocated, the runtime has set its device and allocated). Each
//   sample is its own process; half of them time memarea first, half the runtime. Each side's
//   figure comes from the processes where it went first (its call is then the process's first
//   of its kind, which pays the driver's one-time work); the note gives the others' medians.
// - first of an allocation, in a warm process: export of a new allocation; import of a handle
//   not opened before.
// - a warm re-import (memarea's cache), back to back, 70 ms apart and 1 s apart, against the
//   driver's re-open after close, the driver's open of a handle it has open already (its own
//   reference count), and a user-side cache (a hash map of opened pointers).
// - the C API's hot paths against the C++ calls (export, import hit, lookup).
// - pooled: importing 100 sub-allocations of one pool block (one driver open) against importing
//   100 separate allocations of the same size with the raw open.
//
// Exporting needs another process: the bench re-executes this binary with MEMAREA_BENCH_IPC_ROLE
// set, and main() runs that role (run_child_role, bench_ipc_roles.cpp) instead of the command
// line. The exporter makes both sides' buffers: memarea's through memarea (exported with
// ipc::export_handle), the baseline's with the raw calls (exported with the raw get-handle
// call), each filled with random bytes of its own; every opened mapping's first 4 KiB are
// checked against them (untimed), each side's through its own copies. On CUDA the raw calls are
// the runtime's (cudaIpc*), loaded at run time; elsewhere, the driver layer's on a driver of its
// own (raw_driver.hpp, bench_ipc.hpp's raw_ipc). Estimator: docs/bench.md.
#include "bench/src/bench_ipc.hpp"

#include <memarea/area.hpp>
#include <memarea/c_interop.hpp>
#include <memarea/copy.hpp>
#include <memarea/ipc.hpp>
#include <memarea/memarea.h>
#include <memarea/pointer.hpp>
#include <memarea/pool.hpp>

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
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace memarea::cli::bench {
namespace {

using namespace ipc_case;

/// A child running a role: its stdout lines, and stdin held open until destruction.
class role_process {
 public:
  role_process(const std::string& role, const std::string& arg) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
      throw error(errc::unknown, "bench ipc: pipe failed");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      setenv(kRoleEnv, role.c_str(), 1);
      setenv(kArgEnv, arg.c_str(), 1);
      char self[] = "memarea-bench";
      char* argv[] = {self, nullptr};
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = fdopen(out[0], "r");
  }
  ~role_process() {
    ::close(to_);
    if (from_) fclose(from_);
    int st;
    waitpid(pid_, &st, 0);
  }
  role_process(const role_process&) = delete;
  role_process& operator=(const role_process&) = delete;
  std::string line() {
    char buf[1024] = {0};
    if (!from_ || !fgets(buf, sizeof buf, from_))
      throw error(errc::unknown, "bench ipc: a child process printed nothing (see its stderr)");
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
};

row make_row(const std::string& group, const std::string& variant, const std::vector<double>& m,
             const std::vector<double>& r, const std::string& raw_name) {
  return measured_row(group, variant, "us", m, r, raw_name);
}

void pooled_import_rows(context& ctx, const raw_ipc& raw);

void ipc_bench(context& ctx) {
  if (device_count() == 0) {
    std::cerr << "bench ipc: no devices, no rows\n";
    return;
  }
  const raw_ipc raw;
  if (!raw.available()) {
    std::cerr << "bench ipc: no baseline on the " << backend_name() << " backend, no rows\n";
    return;
  }
  const bool quick = ctx.quick;
  const int cold_runs = quick ? 4 : 12;  // even: half of them time memarea first
  const int first_reps = quick ? 10 : 40;
  // Buffers of the exporter, per side: 1 per cold import (two kinds), 1 per first import, and
  // for the warm rows 1 of memarea's and 2 of the baseline's (re-opened; held open).
  const std::size_t n_buffers = static_cast<std::size_t>(2 * cold_runs + first_reps + 2);
  role_process exporter("exporter", std::to_string(n_buffers));
  std::vector<std::string> hex(n_buffers), raw_hex(n_buffers);
  for (auto& h : hex) h = exporter.line();
  for (auto& h : raw_hex) h = exporter.line();
  std::size_t next = 0, next_raw = 0;  // the next buffer of each side no one opened yet

  // --- cold: first export and first import in a fresh process ---
  for (const char* settle : {"settled", "racing"}) {
    std::vector<double> em, er, im, ir;
    for (int k = 0; k < cold_runs; ++k) {
      const std::string order = k % 2 == 0 ? "m" : "r";
      {
        role_process p("cold-export", order + " " + settle);
        double a = 0, b = 0;
        if (std::sscanf(p.line().c_str(), "%lf %lf", &a, &b) != 2)
          throw error(errc::unknown, "bench ipc: cold export printed no times");
        em.push_back(a);
        er.push_back(b);
      }
      const std::size_t i = next++, j = next_raw++;
      role_process p("cold-import", fmt::format("{} {} {} {} {} {}", order, settle, i, hex[i], j,
                                                raw_hex[j]));
      double a = 0, b = 0;
      const std::string got = p.line();
      if (got == "wrong bytes")
        throw error(errc::unknown, "bench ipc: a cold import holds the wrong bytes");
      if (std::sscanf(got.c_str(), "%lf %lf", &a, &b) != 2)
        throw error(errc::unknown, "bench ipc: cold import printed no times");
      im.push_back(a);
      ir.push_back(b);
    }
    const bool settled = std::string(settle) == "settled";
    const std::string variant = settled ? "cold: first in a process" : "cold, racing its set-up";
    // Each library's first call of its kind in its process, against the other's: memarea's
    // samples from the processes where it went first (even k), the runtime's from those where
    // it did (odd k). The process's first IPC call pays the driver's one-time work, whichever
    // library makes it: the samples of the side that went second are no cold call.
    auto going = [](const std::vector<double>& t, int parity) {
      std::vector<double> out;
      for (std::size_t k = static_cast<std::size_t>(parity); k < t.size(); k += 2) out.push_back(t[k]);
      return out;
    };
    const std::string note = fmt::format(
        "{} processes: each side's figure from the {} where it went first; {}", cold_runs,
        cold_runs / 2,
        settled ? "5 ms after the first allocation"
                : "right after the first allocation, while memarea's background set-up may "
                  "still run");
    auto second_note = [&](const std::vector<double>& m, const std::vector<double>& r) {
      return fmt::format("; going second, medians memarea {:.1f} us, runtime {:.1f} us",
                         median(going(m, 1)), median(going(r, 0)));
    };
    row e = make_row("ipc export", variant, going(em, 0), going(er, 1), raw.name("IpcGetMemHandle"));
    if (settled) {
      e.target = "<= raw + 15 us";
      e.met = e.memarea <= e.raw + 15;
    }
    e.note = note + second_note(em, er);
    ctx.add(e);
    row i = make_row("ipc import", variant, going(im, 0), going(ir, 1), raw.name("IpcOpenMemHandle"));
    if (settled) {
      i.target = "<= 1.2x raw";
      i.met = i.memarea <= 1.2 * i.raw;
    }
    i.note = note + second_note(im, ir);
    ctx.add(i);
  }

  // --- first export of an allocation, in a warm process ---
  {
    std::vector<double> m, r;
    for (int k = 0; k < first_reps; ++k) {
      buffer b = area(0).allocate(kBytes);
      void* q = raw.malloc();
      auto mem = [&] { m.push_back(time_us([&] { (void)ipc::export_handle(b.data()); })); };
      auto rawf = [&] { r.push_back(time_us([&] { (void)raw.get_handle(q); })); };
      if (k % 2 == 0) mem(), rawf();
      else rawf(), mem();
      raw.free(q);
    }
    row x = make_row("ipc export", "first of an allocation", m, r, raw.name("IpcGetMemHandle"));
    x.target = "<= 1.2x raw";
    x.met = x.memarea <= 1.2 * x.raw;
    ctx.add(x);
  }

  // --- a repeated export of one allocation (both sides cache) ---
  {
    constexpr int kBatch = 100;
    buffer b = area(0).allocate(kBytes);
    void* q = raw.malloc();
    (void)ipc::export_handle(b.data());
    (void)raw.get_handle(q);
    std::vector<double> m, r;
    for (int k = 0; k < (quick ? 20 : 100); ++k) {
      m.push_back(time_us([&] {
                    for (int i = 0; i < kBatch; ++i) (void)ipc::export_handle(b.data());
                  }) / kBatch);
      r.push_back(time_us([&] {
                    for (int i = 0; i < kBatch; ++i) (void)raw.get_handle(q);
                  }) / kBatch);
    }
    raw.free(q);
    ctx.add(make_row("ipc export", "repeated (batches of 100)", m, r,
                     raw.name("IpcGetMemHandle") + ", repeated"));
  }

  // --- first import of an allocation (a handle not opened before), in a warm process ---
  std::vector<void*> keep_open;
  {
    std::vector<double> m, r;
    for (int k = 0; k < first_reps; ++k) {
      const std::size_t i = next++, j = next_raw++;
      const ipc::handle h = ipc::handle::from_hex(hex[i]);
      const raw_handle native = raw_handle::from_hex(raw_hex[j]);
      void* p = nullptr;
      void* q = nullptr;
      auto mem = [&] { m.push_back(time_us([&] { p = ipc::open(h, 0); })); };
      auto rawf = [&] { r.push_back(time_us([&] { q = raw.open(native); })); };
      if (k % 2 == 0) mem(), rawf();
      else rawf(), mem();
      if (!holds(p, i) || !holds(q, kRawBase + j, raw.copier()))
        throw error(errc::unknown, "bench ipc: an imported buffer holds the wrong bytes");
      ipc::close(p);
      raw.close(q);
    }
    row x = make_row("ipc import", "first of an allocation", m, r, raw.name("IpcOpenMemHandle"));
    x.target = "<= 1.2x raw";
    x.met = x.memarea <= 1.2 * x.raw;
    ctx.add(x);
  }

  // --- warm re-import at three spacings ---
  {
    const std::size_t w = next++, x = next_raw++, y = next_raw++;
    const ipc::handle mh = ipc::handle::from_hex(hex[w]);
    const raw_handle reopen_native = raw_handle::from_hex(raw_hex[x]);
    const raw_handle held_native = raw_handle::from_hex(raw_hex[y]);
    // memarea's cache holds w (opened once, closed); the driver holds y open for its refcount.
    void* p = ipc::open(mh, 0);
    if (!holds(p, w)) throw error(errc::unknown, "bench ipc: wrong bytes");
    ipc::close(p);
    void* held = raw.open(held_native);
    if (!holds(held, kRawBase + y, raw.copier()))
      throw error(errc::unknown, "bench ipc: wrong bytes");
    void* q = raw.open(reopen_native);
    if (!holds(q, kRawBase + x, raw.copier()))
      throw error(errc::unknown, "bench ipc: wrong bytes");
    raw.close(q);
    // A user's own cache: driver handle bytes -> the pointer it opened.
    std::unordered_map<std::string, void*> user_cache;
    const std::string key(reinterpret_cast<const char*>(held_native.bytes), 64);
    user_cache[key] = held;
    for (int f = 0; f < 100; ++f) user_cache[std::to_string(f)] = nullptr;  // a used map

    struct spacing {
      const char* name;
      std::chrono::milliseconds pause;
      int rounds;
    };
    for (const spacing s : {spacing{"back to back", std::chrono::milliseconds(0), quick ? 50 : 200},
                            spacing{"70 ms apart", std::chrono::milliseconds(70), quick ? 5 : 15},
                            spacing{"1 s apart", std::chrono::milliseconds(1000), quick ? 2 : 5}}) {
      std::vector<double> mem, reopen, refcount, cache;
      void* sink = nullptr;
      for (int k = 0; k < s.rounds; ++k) {
        // Each variant after its own pause, in turns.
        auto pause = [&] {
          if (s.pause.count()) std::this_thread::sleep_for(s.pause);
        };
        pause();
        mem.push_back(time_us([&] { p = ipc::open(mh, 0); }));
        ipc::close(p);
        pause();
        reopen.push_back(time_us([&] { q = raw.open(reopen_native); }));
        raw.close(q);
        pause();
        refcount.push_back(time_us([&] { q = raw.open(held_native); }));
        raw.close(q);
        pause();
        cache.push_back(time_us([&] { sink = user_cache.find(key)->second; }));
      }
      if (p != ipc::open(mh, 0) || sink != held) throw error(errc::unknown, "bench ipc: wrong pointer");
      ipc::close(p);
      const std::string v = fmt::format("warm re-open, {}", s.name);
      row a = make_row("ipc import", v, mem, reopen, raw.name("IpcOpenMemHandle") + " after close");
      a.target = "<= 1 us";
      a.met = a.memarea <= 1.0;
      ctx.add(a);
      row b = make_row("ipc import", v, mem, refcount,
                       raw.name("IpcOpenMemHandle") + " of a handle open already");
      ctx.add(b);
      row c = make_row("ipc import", v, mem, cache, "user-side cache (hash map of opened pointers)");
      ctx.add(c);
    }
    raw.close(held);
  }

  // --- the C API's hot paths against the C++ calls (ns per call, batches of 1000) ---
  {
    constexpr int kBatch = 1000;
    const int reps = quick ? 20 : 100;
    buffer b = area(0).allocate(kBytes);
    const ipc::handle own = ipc::export_handle(b.data());
    const ipc::handle theirs = ipc::handle::from_hex(hex[0]);  // opened (and cached) above
    (void)own;
    memarea_ipc_handle_t ch;
    void* p = nullptr;
    memarea_allocation_info info;
    auto batch_ns = [&](auto&& f) {
      return time_us([&] {
               for (int i = 0; i < kBatch; ++i) f();
             }) * 1000.0 / kBatch;
    };
    struct hot_path {
      const char* name;
      std::function<void()> c, cpp;
    };
    const memarea_ipc_handle_t theirs_c = to_c(theirs);
    const std::vector<hot_path> paths = {
        {"export (repeated)",
         [&] { (void)memarea_ipc_get_mem_handle(&ch, b.data()); },
         [&] { ch = to_c(ipc::export_handle(b.data())); }},
        {"import hit (open+close)",
         [&] {
           (void)memarea_ipc_open_mem_handle(&p, theirs_c, 0);
           (void)memarea_ipc_close_mem_handle(p);
         },
         [&] { ipc::close(ipc::open(theirs)); }},
        {"lookup", [&] { (void)memarea_pointer_get_info(&info, b.data()); },
         [&] { (void)lookup(b.data()); }},
    };
    for (const auto& hp : paths) {
      std::vector<double> c, cpp;
      hp.c();
      hp.cpp();
      for (int k = 0; k < reps; ++k) {
        if (k % 2 == 0) {
          c.push_back(batch_ns(hp.c));
          cpp.push_back(batch_ns(hp.cpp));
        } else {
          cpp.push_back(batch_ns(hp.cpp));
          c.push_back(batch_ns(hp.c));
        }
      }
      row x = make_row("C API overhead", hp.name, c, cpp, "the C++ call");
      x.unit = "ns";
      x.target = "<= C++ + 10 ns";
      x.met = x.memarea <= x.raw + 10;
      // The call's own time drifts between batches by more than the C API's cost: each pair of
      // adjacent batches' difference shows the cost without that drift.
      std::vector<double> paired;
      for (std::size_t k = 0; k < c.size(); ++k) paired.push_back(c[k] - cpp[k]);
      std::sort(paired.begin(), paired.end());
      x.note = fmt::format("C API costs {:+.1f} ns; adjacent batches differ by {:+.1f} {:+.1f} "
                           "{:+.1f} ns (min median max)",
                           x.memarea - x.raw, paired.front(), paired[paired.size() / 2],
                           paired.back());
      ctx.add(x);
    }
  }

  pooled_import_rows(ctx, raw);
}

/// Importing the pieces of one pool block against importing as many separate allocations.
void pooled_import_rows(context& ctx, const raw_ipc& raw) {
  constexpr std::size_t kPieces = 100;
  const int rounds = ctx.quick ? 2 : 5;
  // Each separate allocation on a 2 MiB page of its own on CUDA (see kBytes); the sim's device
  // (1 GiB by default) gets smaller ones.
  const std::size_t bytes = backend_name() == "sim" ? std::size_t{256} << 10 : kBytes;
  role_process exporter("pool-exporter", fmt::format("{} {} {}", rounds, kPieces, bytes));
  std::vector<double> m, r, first, rest;
  std::size_t i = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::string> pieces(kPieces), separate(kPieces);
    for (auto& h : pieces) h = exporter.line();
    for (auto& h : separate) h = exporter.line();
    std::vector<ipc::handle> hs;
    std::vector<raw_handle> natives;
    for (const auto& h : pieces) hs.push_back(ipc::handle::from_hex(h));
    for (const auto& h : separate) natives.push_back(raw_handle::from_hex(h));
    std::vector<void*> p(kPieces), q(kPieces);
    const std::size_t opens_before = ipc::driver_opens();
    auto mem = [&] {
      // Where the time goes: the first open (the driver maps the block) and the others.
      const auto a = clock_type::now();
      p[0] = ipc::open(hs[0], 0);
      const auto b = clock_type::now();
      for (std::size_t k = 1; k < kPieces; ++k) p[k] = ipc::open(hs[k], 0);
      const auto c = clock_type::now();
      using us = std::chrono::duration<double, std::micro>;
      m.push_back(us(c - a).count());
      first.push_back(us(b - a).count());
      rest.push_back(us(c - b).count() / (kPieces - 1));
    };
    auto rawf = [&] {
      r.push_back(time_us([&] {
        for (std::size_t k = 0; k < kPieces; ++k) q[k] = raw.open(natives[k]);
      }));
    };
    if (round % 2 == 0) mem(), rawf();
    else rawf(), mem();
    if (ipc::driver_opens() - opens_before != 1)
      throw error(errc::unknown, "bench ipc: the pieces of one block took more than one open");
    for (std::size_t k = 0; k < kPieces; ++k)
      if (!holds(p[k], i + k) || !holds(q[k], kRawBase + i + kPieces + k, raw.copier()))
        throw error(errc::unknown, "bench ipc: an imported piece holds the wrong bytes");
    for (void* x : p) ipc::close(x);
    for (void* x : q) raw.close(x);
    i += 2 * kPieces;
  }
  row x = make_row("ipc import", "100 pieces of one pool block", m, r,
                   raw.name("IpcOpenMemHandle") + " of 100 separate allocations");
  x.target = ">= 50x faster";
  x.met = x.memarea * 50 <= x.raw;
  const spread f = spread_of(first), o = spread_of(rest);
  x.note = fmt::format("{} rounds, each with a new block; {} KiB each; alternating which goes "
                       "first; the first round includes mapping the exporter's segment; "
                       "memarea's first open (the driver maps the block) {:.1f}-{:.1f}-{:.1f} "
                       "us, each other {:.3f}-{:.3f}-{:.3f} us",
                       rounds, bytes >> 10, f.min, f.median, f.max, o.min, o.median, o.max);
  ctx.add(x);
}

const registrar reg("ipc", ipc_bench, {
    "ipc export, ipc import: cold (first in a process), cold racing its set-up, first of an "
    "allocation",
    "ipc export: repeated (batches of 100)",
    "ipc import: warm re-open back to back, 70 ms apart, 1 s apart (each vs three baselines)",
    "C API overhead: export (repeated), import hit (open+close), lookup",
    "ipc import: 100 pieces of one pool block"});

}  // namespace
}  // namespace memarea::cli::bench
