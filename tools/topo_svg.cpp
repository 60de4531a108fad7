// `memarea topo --svg` (tools/topo_svg.hpp). Every section is placed below the one before it
// and every panel beside or below another at its own measured width, so the picture grows with
// its texts instead of letting them run into each other.
#include "tools/topo_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace memarea::cli::svg {

namespace {

/// DejaVu Sans's advance widths (em) of the printable ASCII characters, from ' ' to '~'.
constexpr double k_advance[95] = {
    0.318, 0.401, 0.460, 0.838, 0.636, 0.950, 0.780, 0.275, 0.390, 0.390,  //  !"#$%&'()
    0.500, 0.838, 0.318, 0.361, 0.318, 0.337, 0.636, 0.636, 0.636, 0.636,  // *+,-./0123
    0.636, 0.636, 0.636, 0.636, 0.636, 0.636, 0.337, 0.337, 0.838, 0.838,  // 456789:;<=
    0.838, 0.531, 1.000, 0.684, 0.686, 0.698, 0.770, 0.632, 0.575, 0.775,  // >?@ABCDEFG
    0.752, 0.295, 0.295, 0.656, 0.557, 0.863, 0.748, 0.787, 0.603, 0.787,  // HIJKLMNOPQ
    0.695, 0.635, 0.611, 0.732, 0.684, 0.989, 0.685, 0.611, 0.685, 0.390,  // RSTUVWXYZ[
    0.337, 0.390, 0.838, 0.500, 0.500, 0.613, 0.635, 0.550, 0.635, 0.615,  // \]^_`abcde
    0.352, 0.635, 0.634, 0.278, 0.278, 0.579, 0.278, 0.974, 0.634, 0.612,  // fghijklmno
    0.635, 0.635, 0.411, 0.521, 0.392, 0.634, 0.592, 0.818, 0.592, 0.592,  // pqrstuvwxy
    0.525, 0.636, 0.337, 0.636, 0.838};                                     // z{|}~

/// Above and below the baseline, in em: DejaVu Sans's ascent (accents included) and descent.
constexpr double k_ascent = 0.93, k_descent = 0.24;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

double num(const nlohmann::json& j) {
  return j.is_number() ? j.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

/// A figure with about four significant digits and no more width than it needs.
std::string figure(double v) {
  if (std::isnan(v)) return "-";
  if (v >= 1000) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

/// White to deep blue.
std::string colour(double t) {
  auto mix = [t](int from, int to) { return static_cast<int>(std::lround(from + (to - from) * t)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(247, 8), mix(251, 48), mix(255, 107));
}

/// The SVG being written, and the box of every text in it.
class canvas {
 public:
  /// A text with its baseline at y; returns its box.
  box text(double x, double y, double size, const std::string& s, const char* anchor = "start",
           bool bold = false, const char* fill = "#111111") {
    const box b = text_box(s, x, y, size, anchor, bold);
    body_ += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="{}"{} fill="{}">{}</text>)"
                         "\n",
                         x, y, size, anchor, bold ? R"( font-weight="bold")" : "", fill,
                         escape(s));
    texts_.push_back({b, s});
    extend(b.x1, b.y1);
    return b;
  }
  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& extra = "") {
    body_ += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"{}/>)"
                         "\n",
                         x, y, w, h, fill, extra);
    extend(x + w, y + h);
  }
  void extend(double x, double y) {
    right_ = std::max(right_, x);
    bottom_ = std::max(bottom_, y);
  }
  double right() const { return right_; }
  double bottom() const { return bottom_; }
  picture finish(double margin) {
    picture p;
    p.width = std::ceil(right_ + margin);
    p.height = std::ceil(bottom_ + margin);
    p.svg = fmt::format(
        R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="DejaVu Sans, Liberation Sans, Arial, sans-serif">)"
        "\n"
        R"(<rect width="100%" height="100%" fill="#ffffff"/>)"
        "\n",
        p.width, p.height);
    p.svg += body_ + "</svg>\n";
    p.texts = std::move(texts_);
    return p;
  }

 private:
  std::string body_;
  std::vector<text_item> texts_;
  double right_ = 0, bottom_ = 0;
};

constexpr double k_margin = 20, k_gap = 40;

/// How a panel's colours are anchored, and the words that say so.
struct scale {
  double reference = std::numeric_limits<double>::quiet_NaN();
  bool lower_is_better = false;
  std::string left, right;  ///< the words at the scale's two ends
};

/// Anchors a bandwidth scale at 0 and the links' nominal peak when every cell's is known, else
/// at the best cell; a latency scale at the best (lowest) cell.
scale make_scale(const std::vector<double>& cells, const std::vector<double>& nominal,
                 bool lower_is_better, const char* unit) {
  scale s;
  s.lower_is_better = lower_is_better;
  double best = lower_is_better ? INFINITY : -INFINITY;
  for (double v : cells)
    if (!std::isnan(v)) best = lower_is_better ? std::min(best, v) : std::max(best, v);
  if (!std::isfinite(best)) best = std::numeric_limits<double>::quiet_NaN();
  if (lower_is_better) {
    s.reference = best;
    s.left = "slower";
    s.right = fmt::format("best cell: {} {}", figure(best), unit);
    return s;
  }
  const bool all_known = !nominal.empty() && std::none_of(nominal.begin(), nominal.end(),
                                                          [](double v) { return std::isnan(v); });
  s.left = fmt::format("0 {}", unit);
  if (all_known) {
    s.reference = *std::max_element(nominal.begin(), nominal.end());
    s.right = fmt::format("nominal link peak: {} {}", figure(s.reference), unit);
  } else {
    s.reference = best;
    s.right = fmt::format("best cell: {} {}", figure(best), unit);
  }
  return s;
}

/// A coloured scale bar of width w at (x, y) with its words below; returns its bottom.
double draw_scale(canvas& c, double x, double y, double w, const scale& s) {
  constexpr int steps = 25;
  for (int i = 0; i < steps; ++i) {
    const double t = (i + 0.5) / steps;
    c.rect(x + w * i / steps, y, w / steps + 0.5, 10, colour(t));
  }
  const double line = y + 10 + 13;
  const double lw = text_width(s.left, 10, false), rw = text_width(s.right, 10, false);
  c.text(x, line, 10, s.left, "start", false, "#444444");
  if (lw + 12 + rw <= w) {
    c.text(x + w, line, 10, s.right, "end", false, "#444444");
    return line + 3;
  }
  c.text(x + w, line + 13, 10, s.right, "end", false, "#444444");
  return line + 16;
}

/// The scale's width: at least the words at its ends side by side or the grid's width.
double scale_width(const scale& s, double grid) {
  return std::max({grid, 160.0, std::max(text_width(s.left, 10, false),
                                         text_width(s.right, 10, false))});
}

/// One matrix of the peer section.
struct panel_spec {
  std::string title, subtitle;
  const nlohmann::json* values;  ///< [src][dst]
  const nlohmann::json* raw;     ///< same shape or nullptr
  scale sc;
};

struct panel_size {
  double width, height, cell_w, cell_h, label_w;
};

constexpr double k_header = 18;  // title line
constexpr double k_sub = 14;     // subtitle line

panel_size measure_panel(const panel_spec& p, const nlohmann::json& topo, int n) {
  panel_size s{};
  s.label_w = text_width("GPU " + std::to_string(n - 1), 11, false) + 8;
  double widest = text_width("GPU " + std::to_string(n - 1), 11, false);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      widest = std::max(widest, text_width(figure(num((*p.values)[a][b])), 12, false));
      widest = std::max(widest, text_width(topo.at("link")[a][b].get<std::string>(), 9, false));
      if (p.raw)
        widest = std::max(widest, text_width("raw " + figure(num((*p.raw)[a][b])), 9, false));
    }
  s.cell_w = std::max(64.0, std::ceil(widest + 10));
  s.cell_h = p.raw ? 50 : 38;
  const double grid = s.cell_w * n;
  s.width = std::max({s.label_w + grid, text_width(p.title, 14, true), text_width(p.subtitle, 10, false),
                      s.label_w + scale_width(p.sc, grid)});
  s.height = k_header + k_sub + 16 + s.cell_h * n + 10 + 10 + 13 + 16 + 3;
  return s;
}

/// Draws a panel at (x, y) (its top left); returns its bottom.
double draw_panel(canvas& c, const panel_spec& p, const panel_size& s, const nlohmann::json& topo,
                  int n, double x, double y) {
  c.text(x, y + 14, 14, p.title, "start", true);
  c.text(x, y + k_header + 11, 10, p.subtitle, "start", false, "#555555");
  const double gx = x + s.label_w, gy = y + k_header + k_sub + 16;
  for (int b = 0; b < n; ++b)
    c.text(gx + b * s.cell_w + s.cell_w / 2, gy - 5, 11, "GPU " + std::to_string(b), "middle");
  for (int a = 0; a < n; ++a) {
    c.text(gx - 8, gy + a * s.cell_h + s.cell_h / 2 + 4, 11, "GPU " + std::to_string(a), "end");
    for (int b = 0; b < n; ++b) {
      const double cx = gx + b * s.cell_w, cy = gy + a * s.cell_h;
      const double v = a == b ? NAN : num((*p.values)[a][b]);
      const double t = shade(v, p.sc.reference, p.sc.lower_is_better);
      c.rect(cx, cy, s.cell_w, s.cell_h, std::isnan(v) ? "#e4e4e4" : colour(t),
             R"( stroke="#ffffff" data-cell="peer")");
      const char* ink = (!std::isnan(v) && t > 0.55) ? "#ffffff" : "#111111";
      const double mid = cx + s.cell_w / 2;
      if (a == b) {
        c.text(mid, cy + s.cell_h / 2 + 4, 12, "-", "middle", false, "#777777");
        continue;
      }
      c.text(mid, cy + 17, 12, figure(v), "middle", false, ink);
      c.text(mid, cy + 31, 9, topo.at("link")[a][b].get<std::string>(), "middle", false, ink);
      if (p.raw) c.text(mid, cy + 44, 9, "raw " + figure(num((*p.raw)[a][b])), "middle", false, ink);
    }
  }
  const double sy = gy + n * s.cell_h + 10;
  return draw_scale(c, gx, sy, scale_width(p.sc, s.cell_w * n), p.sc);
}

std::vector<double> off_diagonal(const nlohmann::json& m, int n) {
  std::vector<double> v;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) v.push_back(num(m[a][b]));
  return v;
}

std::vector<double> column(const nlohmann::json& v) {
  std::vector<double> out;
  for (auto& x : v) out.push_back(num(x));
  return out;
}

/// Bytes in binary units, whole where they are ("256 MiB", "64 KiB", "1.50 MiB").
std::string binary_size(double bytes) {
  const bool mib = bytes >= 1 << 20;
  const double v = bytes / (mib ? 1 << 20 : 1024);
  return (v == std::floor(v) ? fmt::format("{:.0f}", v) : figure(v)) + (mib ? " MiB" : " KiB");
}

}  // namespace

std::string xml_escape(const std::string& s) { return escape(s); }

double text_width(const std::string& text, double size, bool bold) {
  double em = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      em += k_advance[c - 0x20];
    } else if (c >= 0xc0 || c < 0x80) {
      em += 1.0;  // the first byte of a non-ASCII character: as wide as the widest
    }
  }
  return em * size * (bold ? 1.17 : 1.08);
}

box text_box(const std::string& text, double x, double y, double size, const std::string& anchor,
             bool bold) {
  const double w = text_width(text, size, bold);
  const double x0 = anchor == "middle" ? x - w / 2 : anchor == "end" ? x - w : x;
  return {x0, y - k_ascent * size, x0 + w, y + k_descent * size};
}

double shade(double value, double reference, bool lower_is_better) {
  if (std::isnan(value) || std::isnan(reference) || reference <= 0 || value <= 0) return 0;
  const double t = lower_is_better ? reference / value : value / reference;
  return std::round(std::clamp(t, 0.0, 1.0) * 50) / 50;
}

std::vector<std::pair<std::size_t, std::size_t>> overlaps(const std::vector<text_item>& texts) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t i = 0; i < texts.size(); ++i)
    for (std::size_t j = i + 1; j < texts.size(); ++j) {
      const box &a = texts[i].area, &b = texts[j].area;
      if (a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1) out.emplace_back(i, j);
    }
  return out;
}

picture topo_picture(const nlohmann::json& topo) {
  canvas c;
  const int n = static_cast<int>(topo.at("devices").size());
  const bool has_raw = topo.contains("raw") && topo.at("raw").is_object();
  const nlohmann::json none;
  const auto& raw = has_raw ? topo.at("raw") : none;
  double y = k_margin;
  const double x0 = k_margin;
  c.text(x0, y + 18, 18,
         fmt::format("memarea topo: {} backend, {} device{}", topo.value("backend", "?"), n,
                     n == 1 ? "" : "s"),
         "start", true);
  y += 26;
  const double size = topo.value("size", 0.0);
  c.text(x0, y + 13, 11,
         fmt::format("Bandwidth: {} copies, {} per trial, median of {} trials. Latency: 4 KiB "
                     "copies, 100 back to back per trial, event to event, median of trials.",
                     binary_size(size), topo.value("reps", 0), topo.value("trials", 1)),
         "start", false, "#333333");
  y += 16;
  c.text(x0, y + 13, 11,
         has_raw ? "Copy-engine copies through memarea; \"raw\": the bare driver call by the same "
                   "method in the same run. Methods: docs/topo.md."
                 : "Copy-engine copies through memarea (--baseline adds the bare driver's "
                   "figures). Methods: docs/topo.md.",
         "start", false, "#333333");
  y += 30;

  // --- host <-> device: one row per device --------------------------------------------------
  c.text(x0, y + 15, 15, "Host \u2194 device (pinned host memory)", "start", true);
  y += 26;
  struct host_col {
    std::string header, key;
    bool latency;
  };
  const std::vector<host_col> cols{{"H2D GB/s", "host_to_device_gbps", false},
                                   {"D2H GB/s", "device_to_host_gbps", false},
                                   {"H2D 4 KiB \u00b5s", "host_to_device_latency_4k_us", true},
                                   {"D2H 4 KiB \u00b5s", "device_to_host_latency_4k_us", true}};
  std::vector<std::string> dev_labels, link_labels;
  double dev_w = text_width("device", 11, true), link_w = text_width("host link", 11, true);
  for (int d = 0; d < n; ++d) {
    const auto& dj = topo.at("devices")[d];
    dev_labels.push_back(fmt::format("GPU {}: {}", d, dj.value("name", std::string())));
    link_labels.push_back(topo.contains("host_link") ? topo.at("host_link")[d].get<std::string>()
                                                     : std::string("-"));
    dev_w = std::max(dev_w, text_width(dev_labels.back(), 11, false));
    link_w = std::max(link_w, text_width(link_labels.back(), 11, false));
  }
  std::vector<double> col_w;
  std::vector<scale> col_scale;
  const std::vector<double> host_nominal =
      topo.contains("host_link_nominal_gbps") ? column(topo.at("host_link_nominal_gbps"))
                                              : std::vector<double>{};
  for (auto& col : cols) {
    double w = text_width(col.header, 11, true);
    std::vector<double> cells = column(topo.at(col.key));
    if (has_raw) {
      const auto r = column(raw.at(col.key));
      cells.insert(cells.end(), r.begin(), r.end());
    }
    for (int d = 0; d < n; ++d) {
      w = std::max(w, text_width(figure(num(topo.at(col.key)[d])), 12, false));
      if (has_raw) w = std::max(w, text_width("raw " + figure(num(raw.at(col.key)[d])), 9, false));
    }
    col_w.push_back(std::max(76.0, std::ceil(w + 12)));
    col_scale.push_back(make_scale(cells, col.latency ? std::vector<double>{} : host_nominal,
                                   col.latency, col.latency ? "\u00b5s" : "GB/s"));
  }
  const double row_h = has_raw ? 38 : 26, pad = 12;
  double hx = x0;
  c.text(hx, y + 12, 11, "device", "start", true);
  hx += dev_w + pad;
  c.text(hx, y + 12, 11, "host link", "start", true);
  hx += link_w + pad;
  const double cells_x = hx;
  for (std::size_t k = 0; k < cols.size(); ++k) {
    c.text(hx + col_w[k] / 2, y + 12, 11, cols[k].header, "middle", true);
    hx += col_w[k];
  }
  y += 18;
  for (int d = 0; d < n; ++d) {
    const double ry = y + d * row_h;
    c.text(x0, ry + 17, 11, dev_labels[static_cast<std::size_t>(d)]);
    c.text(x0 + dev_w + pad, ry + 17, 11, link_labels[static_cast<std::size_t>(d)]);
    double cx = cells_x;
    for (std::size_t k = 0; k < cols.size(); ++k) {
      const double v = num(topo.at(cols[k].key)[d]);
      const double t = shade(v, col_scale[k].reference, col_scale[k].lower_is_better);
      c.rect(cx, ry, col_w[k], row_h, std::isnan(v) ? "#e4e4e4" : colour(t),
             R"( stroke="#ffffff" data-cell="host")");
      const char* ink = t > 0.55 ? "#ffffff" : "#111111";
      c.text(cx + col_w[k] / 2, ry + 17, 12, figure(v), "middle", false, ink);
      if (has_raw)
        c.text(cx + col_w[k] / 2, ry + 31, 9, "raw " + figure(num(raw.at(cols[k].key)[d])),
               "middle", false, ink);
      cx += col_w[k];
    }
  }
  y += n * row_h + 8;
  // How the host columns are shaded: one line per kind (bandwidth, latency).
  c.text(x0, y + 12, 10,
         fmt::format("Shades: bandwidth from {} (white) to {}; latency by its column's best \u00f7 "
                     "value (H2D {}; D2H {}).",
                     col_scale[0].left, col_scale[0].right, col_scale[2].right,
                     col_scale[3].right),
         "start", false, "#444444");
  y += 34;

  // --- device pairs -------------------------------------------------------------------------
  if (n < 2) {
    c.text(x0, y + 14, 13,
           "One device: no device pairs to measure. The host \u2194 device row above is what "
           "this machine can show.",
           "start", false, "#333333");
    y += 34;
  } else {
    std::vector<double> nominal = off_diagonal(topo.at("link_nominal_gbps"), n);
    std::vector<double> nominal2;
    for (double v : nominal) nominal2.push_back(2 * v);
    auto cells = [&](const char* key, bool with_raw) {
      auto v = off_diagonal(topo.at(key), n);
      if (with_raw && has_raw) {
        const auto r = off_diagonal(raw.at(key), n);
        v.insert(v.end(), r.begin(), r.end());
      }
      return v;
    };
    std::vector<panel_spec> panels{
        {"Unidirectional bandwidth (GB/s)", "rows: source GPU; columns: destination GPU",
         &topo.at("unidirectional_gbps"), has_raw ? &raw.at("unidirectional_gbps") : nullptr,
         make_scale(cells("unidirectional_gbps", true), nominal, false, "GB/s")},
        {"Bidirectional bandwidth (GB/s, both directions)",
         "both directions at once; bytes of both counted", &topo.at("bidirectional_gbps"),
         has_raw ? &raw.at("bidirectional_gbps") : nullptr,
         make_scale(cells("bidirectional_gbps", true), nominal2, false, "GB/s")},
        {"4 KiB copy latency (\u00b5s, event to event)", "rows: source GPU; columns: destination GPU",
         &topo.at("latency_4k_us"), has_raw ? &raw.at("latency_4k_us") : nullptr,
         make_scale(cells("latency_4k_us", true), {}, true, "\u00b5s")},
        {"All pairs at once (GB/s per pair)", "every ordered pair copying together",
         &topo.at("all_pairs_at_once_gbps"), nullptr,
         make_scale(cells("all_pairs_at_once_gbps", false), nominal, false, "GB/s")}};
    std::vector<panel_size> sizes;
    double widest = 0;
    for (auto& p : panels) {
      sizes.push_back(measure_panel(p, topo, n));
      widest = std::max(widest, sizes.back().width);
    }
    // Panels side by side while the row stays within a screen's width, else below.
    const double row_limit = std::max(1240.0, widest);
    double px = x0, row_bottom = y;
    for (std::size_t i = 0; i < panels.size(); ++i) {
      if (px > x0 && px + sizes[i].width > x0 + row_limit) {
        px = x0;
        y = row_bottom + k_gap;
      }
      const double bottom = draw_panel(c, panels[i], sizes[i], topo, n, px, y);
      row_bottom = std::max(row_bottom, bottom);
      px += sizes[i].width + k_gap;
    }
    y = row_bottom + 10;
    if (topo.contains("all_pairs_at_once_total_gbps") &&
        topo.at("all_pairs_at_once_total_gbps").is_number()) {
      c.text(x0, y + 13, 11,
             fmt::format("All pairs at once, total: {} GB/s",
                         figure(topo.at("all_pairs_at_once_total_gbps").get<double>())),
             "start", false, "#333333");
      y += 20;
    }
    y += 16;
  }

  // --- legend -------------------------------------------------------------------------------
  c.text(x0, y + 14, 14, "Legend", "start", true);
  y += 24;
  auto line = [&](const std::string& s) {
    c.text(x0, y + 12, 11, s, "start", false, "#222222");
    y += 17;
  };
  if (topo.contains("link_legend"))
    for (auto& [label, meaning] : topo.at("link_legend").items())
      line(fmt::format("{}: {}", label, meaning.get<std::string>()));
  line("Shades: bandwidth from 0 (white) to the links' nominal peak where NVML gives it, else to "
       "the best cell; latency by best cell \u00f7 value.");
  line("Shades change in steps of 2%: figures within 2% of each other look the same.");
  if (has_raw)
    line("raw: the same copies through the bare driver call (cuMemcpyPeerAsync, cuMemcpyAsync) "
         "on a driver stream, timed the same way in the same run.");
  if (n >= 2) line("Grey cells: a device and itself (not measured).");
  return c.finish(k_margin);
}

}  // namespace memarea::cli::svg
