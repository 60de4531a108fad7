// The snapshot picture (snapshot_svg.hpp).
#include "tools/snapshot_svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace memarea::cli::svg {

namespace {

constexpr double kWidth = 1200, kMargin = 16, kBar = 30, kGap = 4, kFont = 12;

std::string human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[u]);
}

const char* kind_colour(const std::string& kind) {
  if (kind == "device") return "#4c72b0";
  if (kind == "host") return "#55a868";
  if (kind == "managed") return "#dd8452";
  return "#8c8c8c";
}

/// Young (pale yellow) to old (dark red), t in [0, 1].
std::string age_colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const int r = static_cast<int>(255 - 100 * t), g = static_cast<int>(230 * (1 - t)),
            b = static_cast<int>(120 * (1 - t));
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

/// text cut (with "...") to fit width at the picture's font.
std::string fit(std::string text, double width) {
  if (text_width(text, kFont, false) <= width) return text;
  while (!text.empty() && text_width(text + "...", kFont, false) > width) text.pop_back();
  return text + "...";
}

class canvas {
 public:
  void text(const std::string& s, double x, double y, bool bold = false) {
    const std::string t = fit(s, kWidth - kMargin - x);
    body_ += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" font-family="sans-serif"{}>{}</text>)"
                         "\n",
                         x, y, kFont, bold ? R"( font-weight="bold")" : "", xml_escape(t));
    texts_.push_back({text_box(t, x, y, kFont, "start", bold), t});
  }
  void rect(double x, double y, double w, double h, const std::string& fill, int band,
            const char* layer, const std::string& title) {
    body_ += fmt::format(
        R"(<rect x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}" fill="{}" stroke="#333333" stroke-width="0.5" data-band="{}" data-layer="{}"><title>{}</title></rect>)"
        "\n",
        x, y, w, h, fill, band, layer, xml_escape(title));
  }
  picture finish(double height) {
    picture p;
    p.width = kWidth;
    p.height = height;
    p.svg = fmt::format(
        R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}">)"
        "\n" R"(<rect width="100%" height="100%" fill="#ffffff"/>)" "\n{}</svg>\n",
        kWidth, height, kWidth, height, body_);
    p.texts = std::move(texts_);
    return p;
  }

 private:
  std::string body_;
  std::vector<text_item> texts_;
};

double max_age(const nlohmann::json& snap) {
  double m = 0;
  for (const auto& d : snap.at("devices"))
    for (const auto& b : d.at("blocks")) {
      if (b.contains("track")) m = std::max(m, b["track"].value("age_s", 0.0));
      if (b.contains("pieces"))
        for (const auto& p : b["pieces"]) m = std::max(m, p["track"].value("age_s", 0.0));
    }
  return m;
}

/// An age in seconds with a unit that shows its digits: 2.5 s, 340 ms, 12 us.
std::string age_text(double seconds) {
  if (seconds >= 1) return fmt::format("{:.1f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.0f} ms", seconds * 1e3);
  return fmt::format("{:.0f} us", seconds * 1e6);
}

}  // namespace

picture snapshot_picture(const nlohmann::json& snap, snapshot_colour by) {
  canvas c;
  double y = kMargin + kFont;
  c.text(fmt::format("memarea snapshot: {} (blocks to log2 scale, pieces to their block's scale)",
                     snap.value("tracking", false) ? "tracking on" : "tracking off"),
         kMargin, y, true);
  y += kFont + 6;
  c.text(snap.value("tracking_note", std::string()), kMargin, y);
  y += kFont + 8;
  // Legend.
  double x = kMargin;
  const double age_ref = std::max(max_age(snap), 1e-9);
  const std::vector<std::pair<std::string, std::string>> legend =
      by == snapshot_colour::kind
          ? std::vector<std::pair<std::string, std::string>>{{"device", kind_colour("device")},
                                                            {"host", kind_colour("host")},
                                                            {"managed", kind_colour("managed")},
                                                            {"free in pool block", "#eeeeee"}}
          : std::vector<std::pair<std::string, std::string>>{
                {"new", age_colour(0)},
                {age_text(age_ref / 2), age_colour(0.5)},
                {age_text(age_ref) + " (oldest)", age_colour(1)},
                {"untracked", "#cccccc"}};
  for (const auto& [name, colour] : legend) {
    c.rect(x, y - kFont + 2, 12, 12, colour, -1, "legend", name);
    c.text(name, x + 16, y);
    x += 16 + text_width(name, kFont, false) + 20;
  }
  y += 14;
  const double bar_width = kWidth - 2 * kMargin;
  int band = 0;
  for (const auto& d : snap.at("devices")) {
    const int dev = d.at("device").get<int>();
    const auto& u = d.at("usage");
    y += kFont + 10;
    c.text(fmt::format("{}: live {}, cached {}, reserved {}, {} allocations",
                       dev == -1 ? std::string("host") : fmt::format("device {}", dev),
                       human(u.value("live", 0.0)), human(u.value("cached", 0.0)),
                       human(u.value("reserved", 0.0)), d.at("blocks").size()),
           kMargin, y, true);
    y += 6;
    const auto& blocks = d.at("blocks");
    double units = 0;
    for (const auto& b : blocks) units += std::log2(std::max(4096.0, b.value("size", 0.0)) / 4096) + 1;
    const double gaps = blocks.empty() ? 0 : kGap * static_cast<double>(blocks.size() - 1);
    const double per_unit = units > 0 ? std::max(0.0, bar_width - gaps) / units : 0;
    double bx = kMargin;
    for (const auto& b : blocks) {
      const double size = b.value("size", 0.0);
      const double w = (std::log2(std::max(4096.0, size) / 4096) + 1) * per_unit;
      const std::string kind = b.value("kind", std::string("unknown"));
      const bool pool = b.value("origin", std::string()) == "pool_block";
      std::string fill = pool ? "#eeeeee" : kind_colour(kind);
      if (!pool && by == snapshot_colour::age)
        fill = b.contains("track") ? age_colour(b["track"].value("age_s", 0.0) / age_ref) : "#cccccc";
      c.rect(bx, y, w, kBar, fill, band, "block",
             fmt::format("{} {} {}", b.value("origin", std::string()), kind, human(size)));
      if (pool && size > 0) {
        for (const auto& p : b.at("pieces")) {
          const double px = bx + w * p.value("offset", 0.0) / size;
          const double pw = w * p.value("size", 0.0) / size;  // exact: pieces never overlap
          const std::string pf = by == snapshot_colour::kind
                                     ? kind_colour(kind)
                                     : age_colour(p["track"].value("age_s", 0.0) / age_ref);
          c.rect(px, y + 3, std::min(pw, bx + w - px), kBar - 6, pf, band, "piece",
                 fmt::format("piece +{} {}", p.value("offset", 0), human(p.value("size", 0.0))));
        }
      }
      bx += w + kGap;
    }
    y += kBar + kFont + 4;
    std::string users = "largest users:";
    const char* sep = " ";
    for (const auto& l : d.at("largest_users")) {
      users += fmt::format("{}{} ({})", sep, l.value("user", std::string("?")),
                           human(l.value("bytes", 0.0)));
      sep = "; ";
    }
    if (d.at("largest_users").empty()) users += " none tracked";
    c.text(users, kMargin, y);
    ++band;
  }
  return c.finish(y + kMargin);
}

}  // namespace memarea::cli::svg
