// `memarea topo`'s measurements and JSON (core/report/report.hpp declares them, for the C API):
// which devices can reach which, over what link (topo_links.cpp), and how fast memarea copies
// between them and the host, by the methods of NVIDIA's nvbandwidth (copy-engine bandwidth) and
// the CUDA samples' p2pBandwidthLatencyTest (latency), with the bare driver calls measured the
// same way beside them on request. docs/topo.md says exactly how each figure is made.
//
// An optional component above core (MEMAREA_WITH_TOPO, src/CMakeLists.txt; without it
// topo_unavailable.cpp answers instead): memarea's copies through the public API, and the
// driver of the active backend (core/system.hpp) for what the public API cannot do, timing
// with events and the bare driver calls of the baseline. Built into the library so that the
// CLI, the C API's memarea_topo_json and the Python package's memarea.topo() give one document.
#include "core/report/report.hpp"

#include "core/system.hpp"

#include <memarea/area.hpp>
#include <memarea/copy.hpp>
#include <memarea/device.hpp>
#include <memarea/peer.hpp>
#include <memarea/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace memarea::report {
namespace {

// --- timing ----------------------------------------------------------------------------------

/// The active backend's driver calls (the baseline calls it directly, as the bare loop would).
auto& drv() { return detail::system::get().gpu(); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/// A timed event of the driver.
class timed_event {
 public:
  explicit timed_event(int device) : device_(device) {
    detail::check(drv().event_create(device, &e_, detail::event_timing::on), "topo: event");
  }
  ~timed_event() { (void)drv().event_destroy(device_, e_); }
  timed_event(const timed_event&) = delete;
  timed_event& operator=(const timed_event&) = delete;
  detail::native_event get() const noexcept { return e_; }

 private:
  int device_;
  detail::native_event e_ = nullptr;
};

/// A stream of the bare driver (the baseline's; memarea's copies run on memarea::stream).
class raw_stream {
 public:
  explicit raw_stream(int device) : device_(device) {
    detail::check(drv().stream_create(device, &s_), "topo: stream");
  }
  ~raw_stream() { (void)drv().stream_destroy(device_, s_); }
  raw_stream(const raw_stream&) = delete;
  raw_stream& operator=(const raw_stream&) = delete;
  detail::native_stream get() const noexcept { return s_; }

 private:
  int device_;
  detail::native_stream s_ = nullptr;
};

/// Memory of the bare driver: device memory, or pinned host memory allocated by `device`.
class raw_memory {
 public:
  raw_memory(int device, std::size_t size, bool host) : host_(host) {
    detail::check(host ? drv().malloc_host(device, size, detail::host_default, &p_)
                       : drv().malloc_device(device, size, &p_),
                  "topo: allocation");
  }
  ~raw_memory() {
    if (p_) (void)(host_ ? drv().free_host(p_) : drv().free_device(p_));
  }
  raw_memory(const raw_memory&) = delete;
  raw_memory& operator=(const raw_memory&) = delete;
  void* get() const noexcept { return p_; }

 private:
  bool host_;
  void* p_ = nullptr;
};

/// Holds a stream while a trial's copies are queued, as nvbandwidth's spin kernel and
/// p2pBandwidthLatencyTest's delay kernel do, so that the events time the copies and not the
/// host's queueing. memarea runs no kernels: the gate is a copy of pinned host memory to the
/// device, long enough to outlast the queueing; a trial finds out afterwards whether it was
/// (its start event must still be pending once everything is queued) and runs again with a
/// gate twice as long when not.
class gate {
 public:
  explicit gate(int device) : device_(device) {
    const bool sim = backend_name() == "sim";
    bytes_ = sim ? (std::size_t{1} << 20) : (std::size_t{8} << 20);
    max_ = sim ? (std::size_t{32} << 20) : (std::size_t{512} << 20);
    make();
  }
  /// Queues the gate on stream s of the device.
  void hold(detail::native_stream s) {
    detail::check(drv().memcpy_async(dst_->get(), src_->get(), bytes_, device_, s),
                  "topo: gate copy");
  }
  /// Doubles the gate; false when it cannot grow (its limit, or no memory for it).
  bool grow() {
    if (bytes_ * 2 > max_) return false;
    const std::size_t before = bytes_;
    try {
      src_.reset();
      dst_.reset();
      bytes_ *= 2;
      make();
      return true;
    } catch (const error&) {
      bytes_ = before;  // no room for a longer one: keep the one that fitted
      make();
      max_ = bytes_;
      return false;
    }
  }

 private:
  void make() {
    src_.emplace(device_, bytes_, true);
    dst_.emplace(device_, bytes_, false);
  }
  int device_;
  std::size_t bytes_ = 0, max_ = 0;
  std::optional<raw_memory> src_, dst_;
};

/// One stream of a measurement: memarea's (copies through memarea) or a bare driver's.
struct lane_stream {
  int device;
  detail::native_stream native;
};

lane_stream lane_of(const stream& s) { return {s.device(), s.native_handle()}; }
lane_stream lane_of(const raw_stream& s, int device) { return {device, s.get()}; }

/// Seconds between two events around the copies `queue` puts on `main` (and, for copies in
/// both directions, on `other`, which starts with main's start event and which main waits for
/// at its end, as p2pBandwidthLatencyTest's bidirectional test does): main held by the gate
/// while they are queued, the trial run again with a longer gate when it was not held long
/// enough (up to a few times; then counted in `misses`).
template <class Queue>
double timed_trial(gate& g, lane_stream main, const lane_stream* other, Queue&& queue,
                   int& misses) {
  auto& d = drv();
  for (int attempt = 0;; ++attempt) {
    timed_event start(main.device), stop(main.device);
    std::optional<timed_event> other_done;
    g.hold(main.native);
    detail::check(d.event_record(start.get(), main.device, main.native), "topo: record");
    if (other) {
      other_done.emplace(other->device);
      detail::check(d.stream_wait_event(other->device, other->native, start.get()),
                    "topo: stream wait");
    }
    queue();
    if (other) {
      detail::check(d.event_record(other_done->get(), other->device, other->native),
                    "topo: record");
      detail::check(d.stream_wait_event(main.device, main.native, other_done->get()),
                    "topo: stream wait");
    }
    // Still pending: the gate held the stream until everything was queued.
    const bool held = d.event_query(start.get()).code == errc::busy;
    detail::check(d.event_record(stop.get(), main.device, main.native), "topo: record");
    detail::check(d.event_synchronize(stop.get()), "topo: event synchronize");
    float ms = 0;
    detail::check(d.event_elapsed_ms(&ms, start.get(), stop.get()), "topo: elapsed time");
    if (held || attempt >= 3 || !g.grow()) {
      if (!held) ++misses;
      return ms / 1e3;
    }
  }
}

/// What one side (memarea or the bare driver) does in a trial.
struct copier {
  /// Queues a copy of n bytes from (src, src_device) to (dst, dst_device) on a lane.
  std::function<void(void*, int, const void*, int, std::size_t, lane_stream)> copy;
  /// Waits for a lane.
  std::function<void(lane_stream)> sync;
};

copier memarea_copier(const stream& s0, const stream* s1) {
  copier c;
  c.copy = [&s0, s1](void* dst, int dd, const void* src, int sd, std::size_t n, lane_stream l) {
    const stream& s = (s1 && l.native == s1->native_handle()) ? *s1 : s0;
    if (dd < 0) copy_async(dst, src, n, s);  // host <-> device
    else copy_peer_async(dst, dd, src, sd, n, s);
  };
  c.sync = [](lane_stream l) { detail::check(drv().stream_synchronize(l.device, l.native), "topo: synchronize"); };
  return c;
}

copier raw_copier() {
  copier c;
  c.copy = [](void* dst, int dd, const void* src, int sd, std::size_t n, lane_stream l) {
    if (dd < 0)
      detail::check(drv().memcpy_async(dst, src, n, l.device, l.native), "topo: raw copy");
    else
      detail::check(drv().memcpy_peer_async(dst, dd, src, sd, n, l.device, l.native),
                    "topo: raw peer copy");
  };
  c.sync = [](lane_stream l) { detail::check(drv().stream_synchronize(l.device, l.native), "topo: synchronize"); };
  return c;
}

/// Buffers of one side for a pair (a, b): x and y on each device, `size` bytes each.
struct pair_buffers {
  void *xa, *xb, *ya, *yb;
};

/// One trial of each figure of an ordered pair, for one side.
struct pair_trial {
  double uni = 0, bidi = 0, latency = 0;
};

pair_trial run_pair_trial(const copier& c, const pair_buffers& m, int a, int b, lane_stream la,
                          lane_stream lb, gate& g, std::size_t size, int reps, int& misses) {
  pair_trial t;
  // Unidirectional a -> b on a stream of the source (nvbandwidth's *_write_ce, the samples'
  // "P2P Writes").
  t.uni = static_cast<double>(size) * reps /
          timed_trial(g, la, nullptr, [&] {
            for (int i = 0; i < reps; ++i) c.copy(m.xb, b, m.xa, a, size, la);
          }, misses) / 1e9;
  // Both directions at once, each on a stream of its source; bytes of both.
  t.bidi = 2.0 * static_cast<double>(size) * reps /
           timed_trial(g, la, &lb, [&] {
             for (int i = 0; i < reps; ++i) {
               c.copy(m.xb, b, m.xa, a, size, la);
               c.copy(m.ya, a, m.yb, b, size, lb);
             }
           }, misses) / 1e9;
  t.latency = timed_trial(g, la, nullptr, [&] {
                for (int i = 0; i < latency_copies; ++i)
                  c.copy(m.xb, b, m.xa, a, latency_size, la);
              }, misses) * 1e6 / latency_copies;
  return t;
}

/// Host clock of one 4 KiB copy and a synchronize, `count` times: what a program that waits
/// for each small copy sees (the old `memarea topo` latency).
std::vector<double> sync_latencies(const copier& c, void* dst, int dd, const void* src, int sd,
                                   lane_stream l, int count) {
  std::vector<double> us;
  for (int i = 0; i < count; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    c.copy(dst, dd, src, sd, latency_size, l);
    c.sync(l);
    us.push_back(seconds_since(t0) * 1e6);
  }
  return us;
}

/// Measures the ordered pair (a, b): memarea's copies and, with the baseline, the bare driver's,
/// trial by trial in turn so that both see the same machine.
void measure_pair(int a, int b, const topology_options& o, std::deque<gate>& gates,
                  topology& r) {
  std::optional<peer::scoped_access> ab, ba;
  if (peer::can_access(a, b)) ab.emplace(a, b);
  if (peer::can_access(b, a)) ba.emplace(b, a);
  r.path[a][b] = (ab || ba) ? "peer" : "staged";
  const std::size_t size = o.size;
  buffer xa = area(a).allocate(size), xb = area(b).allocate(size);
  buffer ya = area(a).allocate(size), yb = area(b).allocate(size);
  stream sa(a), sb(b);
  const pair_buffers mb{xa.data(), xb.data(), ya.data(), yb.data()};
  const copier mc = memarea_copier(sa, &sb);
  const lane_stream mla = lane_of(sa), mlb = lane_of(sb);
  std::optional<raw_memory> rxa, rxb, rya, ryb;
  std::optional<raw_stream> rsa, rsb;
  const copier rc = raw_copier();
  if (o.baseline) {
    rxa.emplace(a, size, false);
    rxb.emplace(b, size, false);
    rya.emplace(a, size, false);
    ryb.emplace(b, size, false);
    rsa.emplace(a);
    rsb.emplace(b);
  }
  const pair_buffers rb = o.baseline ? pair_buffers{rxa->get(), rxb->get(), rya->get(), ryb->get()}
                                     : pair_buffers{};
  const lane_stream rla = o.baseline ? lane_of(*rsa, a) : lane_stream{},
                    rlb = o.baseline ? lane_of(*rsb, b) : lane_stream{};
  // Warm-up, untimed: first use makes the staging pool, peer mappings and the driver's own
  // state once.
  mc.copy(mb.xb, b, mb.xa, a, size, mla);
  mc.copy(mb.ya, a, mb.yb, b, size, mlb);
  mc.sync(mla);
  mc.sync(mlb);
  if (o.baseline) {
    rc.copy(rb.xb, b, rb.xa, a, size, rla);
    rc.copy(rb.ya, a, rb.yb, b, size, rlb);
    rc.sync(rla);
    rc.sync(rlb);
  }
  std::vector<double> mu, mbi, ml, ru, rbi, rl, msync, rsync;
  gate& g = gates[static_cast<std::size_t>(a)];
  for (int t = 0; t < o.trials; ++t) {
    const auto m = run_pair_trial(mc, mb, a, b, mla, mlb, g, size, o.reps, r.gate_misses);
    mu.push_back(m.uni);
    mbi.push_back(m.bidi);
    ml.push_back(m.latency);
    auto s = sync_latencies(mc, mb.xb, b, mb.xa, a, mla, 20);
    msync.insert(msync.end(), s.begin(), s.end());
    if (!o.baseline) continue;
    const auto w = run_pair_trial(rc, rb, a, b, rla, rlb, g, size, o.reps, r.gate_misses);
    ru.push_back(w.uni);
    rbi.push_back(w.bidi);
    rl.push_back(w.latency);
    s = sync_latencies(rc, rb.xb, b, rb.xa, a, rla, 20);
    rsync.insert(rsync.end(), s.begin(), s.end());
  }
  r.memarea.uni[a][b] = median(mu);
  r.memarea.bidi[a][b] = median(mbi);
  r.memarea.latency[a][b] = median(ml);
  r.memarea.latency_sync[a][b] = median(msync);
  if (o.baseline) {
    r.raw.uni[a][b] = median(ru);
    r.raw.bidi[a][b] = median(rbi);
    r.raw.latency[a][b] = median(rl);
    r.raw.latency_sync[a][b] = median(rsync);
  }
}

/// Host <-> device d with pinned host memory: bandwidth and 4 KiB latency in each direction.
void measure_host(int d, const topology_options& o, std::deque<gate>& gates, topology& r) {
  const std::size_t size = o.size;
  buffer host = area(d, area_flags::host).allocate(size), dev = area(d).allocate(size);
  stream s(d);
  const copier mc = memarea_copier(s, nullptr);
  const lane_stream ml = lane_of(s);
  std::optional<raw_memory> rh, rd;
  std::optional<raw_stream> rs;
  const copier rc = raw_copier();
  if (o.baseline) {
    rh.emplace(d, size, true);
    rd.emplace(d, size, false);
    rs.emplace(d);
  }
  const lane_stream rl = o.baseline ? lane_of(*rs, d) : lane_stream{};
  gate& g = gates[static_cast<std::size_t>(d)];
  struct side {
    const copier& c;
    void *h, *dv;
    lane_stream l;
    std::vector<double> h2d, d2h, h2d_lat, d2h_lat;
  };
  std::vector<side> sides{{mc, host.data(), dev.data(), ml, {}, {}, {}, {}}};
  if (o.baseline) sides.push_back({rc, rh->get(), rd->get(), rl, {}, {}, {}, {}});
  for (auto& sd : sides) {  // warm-up, untimed
    sd.c.copy(sd.dv, -1, sd.h, -1, size, sd.l);
    sd.c.copy(sd.h, -1, sd.dv, -1, size, sd.l);
    sd.c.sync(sd.l);
  }
  const int reps = o.reps;
  for (int t = 0; t < o.trials; ++t) {
    for (auto& sd : sides) {
      auto time = [&](void* dst, const void* src, std::size_t n, int count) {
        return timed_trial(g, sd.l, nullptr, [&] {
          for (int i = 0; i < count; ++i) sd.c.copy(dst, -1, src, -1, n, sd.l);
        }, r.gate_misses);
      };
      sd.h2d.push_back(static_cast<double>(size) * reps / time(sd.dv, sd.h, size, reps) / 1e9);
      sd.d2h.push_back(static_cast<double>(size) * reps / time(sd.h, sd.dv, size, reps) / 1e9);
      sd.h2d_lat.push_back(time(sd.dv, sd.h, latency_size, latency_copies) * 1e6 /
                           latency_copies);
      sd.d2h_lat.push_back(time(sd.h, sd.dv, latency_size, latency_copies) * 1e6 /
                           latency_copies);
    }
  }
  const auto di = static_cast<std::size_t>(d);
  for (std::size_t i = 0; i < sides.size(); ++i) {
    figures& f = i == 0 ? r.memarea : r.raw;
    f.h2d[di] = median(sides[i].h2d);
    f.d2h[di] = median(sides[i].d2h);
    f.h2d_latency[di] = median(sides[i].h2d_lat);
    f.d2h_latency[di] = median(sides[i].d2h_lat);
  }
}

// --- JSON ------------------------------------------------------------------------------------

nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }

nlohmann::json matrix_json(const std::vector<std::vector<double>>& m) {
  auto j = nlohmann::json::array();
  for (auto& row : m) {
    auto jr = nlohmann::json::array();
    for (double v : row) jr.push_back(number(v));
    j.push_back(jr);
  }
  return j;
}

nlohmann::json vector_json(const std::vector<double>& v) {
  auto j = nlohmann::json::array();
  for (double x : v) j.push_back(number(x));
  return j;
}

/// The matrices of one side, under the keys the methods are named by.
nlohmann::json figures_json(const figures& f) {
  return {{"unidirectional_gbps", matrix_json(f.uni)},
          {"bidirectional_gbps", matrix_json(f.bidi)},
          {"latency_4k_us", matrix_json(f.latency)},
          {"latency_4k_sync_us", matrix_json(f.latency_sync)},
          {"host_to_device_gbps", vector_json(f.h2d)},
          {"device_to_host_gbps", vector_json(f.d2h)},
          {"host_to_device_latency_4k_us", vector_json(f.h2d_latency)},
          {"device_to_host_latency_4k_us", vector_json(f.d2h_latency)}};
}

/// How each matrix was measured (docs/topo.md explains each field).
nlohmann::json methods_json(const topology_options& o) {
  const std::string backend = backend_name();
  const std::string engine =
      backend == "sim" ? "host memcpy (sim: a stream's worker thread copies)"
                       : "copy engine (the driver's memcpy; no kernel)";
  const nlohmann::json gate = "stream held by a pinned host-to-device copy while the copies are "
                              "queued (nvbandwidth's spin kernel, without a kernel)";
  auto bandwidth = [&](const char* direction, const char* compare, int streams) {
    return nlohmann::json{{"engine", engine},
                          {"direction", direction},
                          {"size_bytes", o.size},
                          {"copies_per_trial", o.reps},
                          {"trials", o.trials},
                          {"statistic", "median of trials"},
                          {"timing", "event to event on the source's stream"},
                          {"streams", streams},
                          {"gate", gate},
                          {"warm_up", "one untimed copy per direction first"},
                          {"bytes_counted", streams == 2 ? "both directions" : "one direction"},
                          {"compare_with", compare}};
  };
  auto latency = [&](const char* direction, const char* compare) {
    return nlohmann::json{{"engine", engine},
                          {"direction", direction},
                          {"size_bytes", latency_size},
                          {"copies_per_trial", latency_copies},
                          {"trials", o.trials},
                          {"statistic", "mean per copy within a trial; median of trials"},
                          {"timing", "event to event over back-to-back copies on one stream "
                                     "(the copy's time on the device, no host overhead)"},
                          {"gate", gate},
                          {"warm_up", "one untimed copy per direction first"},
                          {"compare_with", compare}};
  };
  nlohmann::json m;
  m["unidirectional_gbps"] = bandwidth(
      "source to destination, on a stream of the source",
      "nvbandwidth device_to_device_memcpy_write_ce (--bufferSize size --loopCount copies); "
      "p2pBandwidthLatencyTest Unidirectional P2P=Enabled (P2P Writes)",
      1);
  m["bidirectional_gbps"] = bandwidth(
      "both directions at once, each on a stream of its source",
      "p2pBandwidthLatencyTest Bidirectional P2P=Enabled (both directions' bytes); nvbandwidth "
      "device_to_device_bidirectional_memcpy_ce reports one direction's share, about half",
      2);
  m["latency_4k_us"] = latency(
      "source to destination, on a stream of the source",
      "p2pBandwidthLatencyTest P2P=Enabled Latency (P2P Writes) GPU matrix (it copies 16 bytes, "
      "100 times)");
  m["latency_4k_sync_us"] = {
      {"engine", engine},
      {"size_bytes", latency_size},
      {"samples", 20 * o.trials},
      {"statistic", "median of samples"},
      {"timing", "host clock around one copy call and the stream's synchronize: issue, the "
                 "copy, completion and the wake-up of the waiting thread"},
      {"compare_with", "a program that waits for each small copy; not a device-side latency"}};
  m["host_to_device_gbps"] = bandwidth("pinned host memory to the device, on a stream of the "
                                       "device",
                                       "nvbandwidth host_to_device_memcpy_ce", 1);
  m["device_to_host_gbps"] = bandwidth("the device to pinned host memory, on a stream of the "
                                       "device",
                                       "nvbandwidth device_to_host_memcpy_ce", 1);
  m["host_to_device_latency_4k_us"] =
      latency("pinned host memory to the device", "bandwidthTest-style small pinned copies");
  m["device_to_host_latency_4k_us"] =
      latency("the device to pinned host memory", "bandwidthTest-style small pinned copies");
  m["all_pairs_at_once_gbps"] = {
      {"engine", engine},
      {"size_bytes", o.size},
      {"copies_per_trial", o.reps},
      {"trials", 1},
      {"streams", "one per ordered pair, of the source device"},
      {"gate", "an event recorded after a pinned host-to-device copy on device 0, sized to "
               "outlast the queueing of every copy, marked on each device by an event of its "
               "own that the device's lanes wait for; checked still pending once all is queued "
               "(all_pairs.gate)"},
      {"timing", "each lane on its device's events, from the device's mark of the gate's "
                 "opening to its last copy; the window is the longest lane; each pair's bytes "
                 "over the window"},
      {"bytes_counted", "each pair's own; egress and ingress sum a device's pairs"},
      {"warm_up", "one untimed copy per pair first"},
      {"compare_with", "no single nvbandwidth test (all_to_one / one_to_all cover parts); each "
                       "device's egress and ingress against its links' capacity "
                       "(peer_capacity_gbps)"}};
  return m;
}

}  // namespace

void topology_defaults(std::size_t& size, int& reps) {
  const bool on_sim = backend_name() == "sim";
  if (size == 0) size = on_sim ? (std::size_t{4} << 20) : (std::size_t{256} << 20);
  if (reps <= 0) reps = on_sim ? 3 : 10;
}

topology measure_topology(const topology_options& o,
                          const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  topology r;
  r.n = device_count();
  const auto n = static_cast<std::size_t>(r.n);
  const double nan = std::nan("");
  r.access.assign(n, std::vector<int>(n, 0));
  r.link.assign(n, std::vector<std::string>(n, "-"));
  r.link_nominal.assign(n, std::vector<double>(n, nan));
  r.path.assign(n, std::vector<std::string>(n, "-"));
  r.concurrent = r.link_nominal;
  for (figures* f : {&r.memarea, &r.raw}) {
    f->uni = f->bidi = f->latency = f->latency_sync = r.link_nominal;
    f->h2d = f->d2h = f->h2d_latency = f->d2h_latency = std::vector<double>(n, nan);
  }
  r.has_raw = o.baseline;
  for (int d = 0; d < r.n; ++d) {
    auto p = get_device_properties(d);
    r.names.push_back(p.name);
    r.pci.push_back(p.pci_bus_id);
  }
  for (int a = 0; a < r.n; ++a)
    for (int b = 0; b < r.n; ++b)
      if (a != b) r.access[a][b] = peer::can_access(a, b) ? 1 : 0;
  label_links(r);
  std::deque<gate> gates;
  for (int d = 0; d < r.n; ++d) gates.emplace_back(d);
  for (int d = 0; d < r.n; ++d) {
    say(fmt::format("measuring host <-> {}", d));
    measure_host(d, o, gates, r);
  }
  for (int a = 0; a < r.n; ++a) {
    for (int b = 0; b < r.n; ++b) {
      if (a == b) continue;
      say(fmt::format("measuring {} -> {}", a, b));
      measure_pair(a, b, o, gates, r);
    }
  }
  gates.clear();  // their memory back before the all-pairs buffers
  if (r.n >= 2) {
    say("measuring all pairs at once");
    measure_all_pairs(o.size, o.reps, r);
  }
  return r;
}

nlohmann::json topology_json(const topology& r, const topology_options& o) {
  nlohmann::json j;
  j["backend"] = backend_name();
  j["size"] = o.size;
  j["reps"] = o.reps;
  j["trials"] = o.trials;
  auto& ds = j["devices"] = nlohmann::json::array();
  for (int d = 0; d < r.n; ++d)
    ds.push_back({{"ordinal", d}, {"name", r.names[d]}, {"pci_bus_id", r.pci[d]}});
  j["access"] = r.access;
  j["link"] = r.link;
  j["link_nominal_gbps"] = matrix_json(r.link_nominal);
  j["host_link"] = r.host_link;
  j["host_link_nominal_gbps"] = vector_json(r.host_link_nominal);
  j["link_legend"] = r.legend;
  j["path"] = r.path;
  j.update(figures_json(r.memarea));
  j["all_pairs_at_once_gbps"] = matrix_json(r.concurrent);
  j["all_pairs_at_once_total_gbps"] = number(r.concurrent_total);
  j["peer_capacity_gbps"] = vector_json(r.peer_capacity);
  if (r.n >= 2) j["all_pairs"] = all_pairs_json(r);
  j["methods"] = methods_json(o);
  j["gate_misses"] = r.gate_misses;
  if (r.has_raw) {
    j["raw"] = figures_json(r.raw);
    j["raw"]["calls"] = backend_name() == "cuda"
                            ? "cuMemcpyPeerAsync / cuMemcpyAsync on a driver stream"
                            : "the backend's peer copy / copy on a driver stream";
  }
  return j;
}

}  // namespace memarea::report
