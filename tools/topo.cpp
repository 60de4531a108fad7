// `memarea topo`: which devices can reach which, over what link, and how fast memarea copies
// between them (unidirectional and bidirectional bandwidth, small-copy latency), as nvbandwidth
// measures it. Text, JSON, or an SVG heatmap.
#include "core/report.hpp"
#include "tools/output_file.hpp"

#include <memarea/device.hpp>
#include <memarea/error.hpp>
#include <memarea/sim.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace memarea::cli {
namespace {

// The measurements and the JSON are the library's (core/report_topo.cpp), which
// memarea_topo_json serves too; this file prints them as text or an SVG heatmap.
using results = report::topology;

/// Progress on stderr, only for a person watching.
void progress(const std::string& what) {
  if (isatty(STDERR_FILENO)) std::cerr << "\rtopo: " << what << "\x1b[K" << std::flush;
}

results run(std::size_t size, int reps) {
  results r = report::measure_topology(size, reps, progress);
  if (isatty(STDERR_FILENO)) std::cerr << "\r\x1b[K";
  return r;
}

// --- output --------------------------------------------------------------------------------

void print_matrix(const std::string& title, const results& r,
                  const std::function<std::string(int, int)>& cell) {
  std::cout << "\n" << title << "\n" << fmt::format("{:>8}", "src\\dst");
  for (int b = 0; b < r.n; ++b) std::cout << fmt::format("{:>10}", b);
  std::cout << "\n";
  for (int a = 0; a < r.n; ++a) {
    std::cout << fmt::format("{:>8}", a);
    for (int b = 0; b < r.n; ++b) std::cout << fmt::format("{:>10}", a == b ? "-" : cell(a, b));
    std::cout << "\n";
  }
}

/// A colour from white (lo) to deep blue (hi); `invert` for "lower is better".
std::string colour(double v, double lo, double hi, bool invert) {
  double t = hi > lo ? (v - lo) / (hi - lo) : 1.0;
  t = std::clamp(invert ? 1.0 - t : t, 0.0, 1.0);
  auto mix = [t](int from, int to) {
    return static_cast<int>(std::lround(from + (to - from) * t));
  };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(247, 8), mix(251, 48), mix(255, 107));
}

/// One heatmap panel at (x0, y0); returns its width.
int svg_panel(std::string& out, int x0, int y0, const std::string& title, const std::string& unit,
              const results& r, const std::vector<std::vector<double>>& m, bool invert) {
  constexpr int cell = 64, label = 56;
  double lo = INFINITY, hi = -INFINITY;
  for (auto& row : m)
    for (double v : row)
      if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = hi = 0;
  out += fmt::format(R"(<text x="{}" y="{}" font-size="15" font-weight="bold">{} ({})</text>)"
                     "\n",
                     x0, y0 + 16, title, unit);
  const int gx = x0 + label, gy = y0 + 48;
  out += fmt::format(R"(<text x="{}" y="{}" font-size="11" fill="#555">destination →</text>)"
                     "\n",
                     gx, gy - 20);
  for (int b = 0; b < r.n; ++b)
    out += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">GPU {}</text>)"
                       "\n",
                       gx + b * cell + cell / 2, gy - 6, b);
  for (int a = 0; a < r.n; ++a) {
    out += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="end">GPU {}</text>)"
                       "\n",
                       gx - 6, gy + a * cell + cell / 2 + 4, a);
    for (int b = 0; b < r.n; ++b) {
      const double v = m[a][b];
      const bool none = std::isnan(v);
      const std::string fill = none ? "#dddddd" : colour(v, lo, hi, invert);
      out += fmt::format(
          R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="#ffffff"/>)"
          "\n",
          gx + b * cell, gy + a * cell, cell, cell, fill);
      double t = hi > lo ? (v - lo) / (hi - lo) : 1.0;
      if (invert) t = 1.0 - t;
      const std::string ink = (!none && t > 0.55) ? "#ffffff" : "#111111";
      out += fmt::format(
          R"(<text x="{}" y="{}" font-size="12" text-anchor="middle" fill="{}">{}</text>)"
          "\n",
          gx + b * cell + cell / 2, gy + a * cell + cell / 2 + 4, ink,
          none ? "-" : fmt::format("{:.1f}", v));
      if (!none)
        out += fmt::format(
            R"(<text x="{}" y="{}" font-size="9" text-anchor="middle" fill="{}">{}</text>)"
            "\n",
            gx + b * cell + cell / 2, gy + a * cell + cell - 6, ink, r.link[a][b]);
    }
  }
  // The colour scale under the grid.
  const int sy = gy + r.n * cell + 14, sw = std::max(r.n * cell, 160);
  for (int i = 0; i < 20; ++i) {
    const double v = lo + (hi - lo) * i / 19.0;
    out += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="12" fill="{}"/>)"
                       "\n",
                       gx + i * sw / 20, sy, sw / 20 + 1, colour(v, lo, hi, invert));
  }
  out += fmt::format(R"(<text x="{}" y="{}" font-size="11">{:.1f}</text>)"
                     "\n",
                     gx, sy + 26, lo);
  out += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{:.1f} {}</text>)"
                     "\n",
                     gx + sw, sy + 26, hi, unit);
  out += fmt::format(R"(<text x="{}" y="{}" font-size="11" fill="#555">source ↓</text>)"
                     "\n",
                     x0, gy - 20);
  return label + sw + 40;
}

std::string svg(const results& r, std::size_t size) {
  std::string body;
  int x = 20;
  const int y = 50;
  x += svg_panel(body, x, y, "Unidirectional bandwidth", "GB/s", r, r.uni, false);
  x += svg_panel(body, x, y, "Bidirectional bandwidth", "GB/s", r, r.bidi, false);
  x += svg_panel(body, x, y, "4 KiB copy latency", "us", r, r.latency, true);
  x += svg_panel(body, x, y, "All pairs at once", "GB/s", r, r.concurrent, false);
  const int height = y + 48 + r.n * 64 + 60;
  std::string head = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)"
      "\n"
      R"(<rect width="100%" height="100%" fill="#ffffff"/>)"
      "\n"
      R"(<text x="20" y="28" font-size="18" font-weight="bold">memarea topo: {} backend, {} device(s), {} MiB copies</text>)"
      "\n",
      x, height, backend_name(), r.n, size >> 20);
  return head + body + "</svg>\n";
}

}  // namespace

/// `memarea topo [--json] [--svg FILE] [--size BYTES] [--reps N]`; no size and reps 0 pick
/// defaults for the backend (sim: small, since its devices live in host memory).
int run_topo(bool json, const std::string& svg_path, const std::string& size_text, int reps) {
  std::size_t size = size_text.empty() ? 0 : memarea::sim::parse_size(size_text);
  if (!size_text.empty() && size == 0) throw error(errc::invalid_value, "topo: --size is 0");
  report::topology_defaults(size, reps);
  // A path that cannot be written fails now, not after a minute of measuring; nothing is
  // created or truncated until the measurement is done.
  if (!svg_path.empty()) require_writable(svg_path, "topo --svg");
  if (device_count() < 2 && !json) std::cerr << "topo: fewer than 2 devices: nothing to measure\n";
  const results r = run(size, reps);
  if (!svg_path.empty()) write_file(svg_path, svg(r, size), "topo --svg");
  if (json) {
    std::cout << report::topology_json(r, size, reps).dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("backend {}, {} device(s); copies of {} bytes, {} repetitions\n",
                           backend_name(), r.n, size, reps);
  for (int d = 0; d < r.n; ++d)
    std::cout << fmt::format("  GPU {}: {} {}\n", d, r.names[d], r.pci[d]);
  if (r.n < 2) return 0;
  print_matrix("peer access (1: can access)", r,
               [&](int a, int b) { return std::to_string(r.access[a][b]); });
  print_matrix("link (NVn: n NVLinks to the peer; NVn?: n active NVLinks whose far end NVML "
               "cannot name)",
               r, [&](int a, int b) { return r.link[a][b]; });
  print_matrix("copy path (peer access enabled where possible)", r,
               [&](int a, int b) { return r.path[a][b]; });
  print_matrix("unidirectional bandwidth (GB/s)", r,
               [&](int a, int b) { return fmt::format("{:.2f}", r.uni[a][b]); });
  print_matrix("bidirectional bandwidth (GB/s, both directions together)", r,
               [&](int a, int b) { return fmt::format("{:.2f}", r.bidi[a][b]); });
  print_matrix("4 KiB copy latency (us)", r,
               [&](int a, int b) { return fmt::format("{:.2f}", r.latency[a][b]); });
  print_matrix("all pairs at once (GB/s per pair, every ordered pair copying together)", r,
               [&](int a, int b) { return fmt::format("{:.2f}", r.concurrent[a][b]); });
  std::cout << fmt::format("all pairs at once, total: {:.2f} GB/s\n", r.concurrent_total);
  return 0;
}

}  // namespace memarea::cli
