// `memarea topo --svg` run on 1, 2, 4 and 8 sim devices and rendered by a real renderer
// (Debian's rsvg-convert, package librsvg2-bin): no two texts of the written SVG overlap, the
// renderer accepts it and draws a PNG of the SVG's size, and (with zlib) every pixel the
// renderer inks for the texts lies inside the boxes the overlap check used, so the boxes are
// honest. The PNGs are written to the build tree (tests/topo-render/ there), for a look by eye.
// Skipped, saying so, where rsvg-convert is missing.
#include "tools/topo_svg.hpp"

#include "topo/topo_built.hpp"

#include <gtest/gtest.h>

#ifdef MEMAREA_HAVE_ZLIB
#include <zlib.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using memarea::cli::svg::text_box;
using memarea::cli::svg::text_item;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool have_rsvg() { return std::system("command -v rsvg-convert >/dev/null 2>&1") == 0; }

std::string unescape(std::string s) {
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"&lt;", "<"}, {"&gt;", ">"},
                                 {"&quot;", "\""}, {"&amp;", "&"}}) {
    for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
      s.replace(at, from.size(), to);
  }
  return s;
}

/// The SVG's size and its texts' boxes, read back from the file (as a renderer reads it).
struct parsed {
  double width = 0, height = 0;
  std::vector<text_item> texts;
  std::string text_only;  ///< the same SVG with nothing but its texts, on no background
};

parsed parse(const std::string& svg) {
  parsed p;
  std::smatch m;
  const std::regex head(R"re(<svg ([^>]*)width="([0-9.]+)" height="([0-9.]+)"([^>]*)>)re");
  if (!std::regex_search(svg, m, head)) return p;
  p.width = std::stod(m[2]);
  p.height = std::stod(m[3]);
  p.text_only = m[0].str() + "\n";
  const std::regex text(
      R"re(<text x="([-0-9.]+)" y="([-0-9.]+)" font-size="([0-9.]+)" text-anchor="(start|middle|end)"( font-weight="bold")?[^>]*>([^<]*)</text>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator();
       ++it) {
    const auto& t = *it;
    const std::string content = unescape(t[6]);
    p.texts.push_back({text_box(content, std::stod(t[1]), std::stod(t[2]), std::stod(t[3]),
                                t[4], t[5].matched),
                       content});
    p.text_only += t[0].str() + "\n";
  }
  p.text_only += "</svg>\n";
  return p;
}

std::uint32_t be32(const std::string& s, std::size_t at) {
  return (std::uint32_t(static_cast<unsigned char>(s[at])) << 24) |
         (std::uint32_t(static_cast<unsigned char>(s[at + 1])) << 16) |
         (std::uint32_t(static_cast<unsigned char>(s[at + 2])) << 8) |
         std::uint32_t(static_cast<unsigned char>(s[at + 3]));
}

/// A PNG's width and height from its IHDR; 0, 0 when it is no PNG.
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 ||
      png.compare(12, 4, "IHDR") != 0)
    return {0, 0};
  return {be32(png, 16), be32(png, 20)};
}

#ifdef MEMAREA_HAVE_ZLIB
/// The alpha channel of an 8-bit RGBA, non-interlaced PNG (what rsvg-convert writes); empty
/// for any other.
std::vector<std::uint8_t> png_alpha(const std::string& png, std::uint32_t& w, std::uint32_t& h) {
  std::tie(w, h) = png_size(png);
  if (w == 0 || png[24] != 8 || png[25] != 6 || png[28] != 0) return {};
  std::string idat;
  for (std::size_t at = 8; at + 8 <= png.size();) {
    const std::uint32_t len = be32(png, at);
    if (png.compare(at + 4, 4, "IDAT") == 0) idat += png.substr(at + 8, len);
    at += 12 + len;
  }
  const std::size_t stride = std::size_t{w} * 4;
  std::vector<std::uint8_t> raw((stride + 1) * h);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()),
                 idat.size()) != Z_OK || raw_len != raw.size())
    return {};
  std::vector<std::uint8_t> px(stride * h), alpha(std::size_t{w} * h);
  for (std::uint32_t y = 0; y < h; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    std::uint8_t* out = &px[y * stride];
    const std::uint8_t* up = y ? &px[(y - 1) * stride] : nullptr;
    for (std::size_t i = 0; i < stride; ++i) {
      const int a = i >= 4 ? out[i - 4] : 0, b = up ? up[i] : 0,
                c = (up && i >= 4) ? up[i - 4] : 0;
      int pred = 0;
      switch (filter) {
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default: break;
      }
      out[i] = static_cast<std::uint8_t>(in[i] + pred);
    }
    for (std::uint32_t x = 0; x < w; ++x) alpha[std::size_t{y} * w + x] = out[x * 4 + 3];
  }
  return alpha;
}
#endif

TEST(TopoRender, PicturesOfOneTwoFourAndEightSimDevicesRenderWithoutOverlaps) {
  if (!have_rsvg())
    GTEST_SKIP() << "rsvg-convert not found: the rendered check needs Debian's librsvg2-bin "
                    "(scripts/setup.sh installs it)";
  const fs::path out_dir = MEMAREA_TOPO_PNG_DIR;
  fs::create_directories(out_dir);
  const fs::path work = fs::temp_directory_path() / ("memarea-topo-render-" + std::to_string(getpid()));
  fs::create_directories(work);
  for (int n : {1, 2, 4, 8}) {
    SCOPED_TRACE("sim devices: " + std::to_string(n));
    const fs::path svg = work / ("topo-sim" + std::to_string(n) + ".svg");
    const fs::path png = out_dir / ("topo-sim" + std::to_string(n) + ".png");
    const std::string run =
        "env -u MEMAREA_SIM_PEER_GROUPS -u MEMAREA_SIM_DEVICE_MEMORY MEMAREA_BACKEND=sim "
        "MEMAREA_SIM_DEVICES=" + std::to_string(n) + " " + shell_quote(MEMAREA_CLI) +
        " topo --size 64K --reps 1 --baseline --svg " + shell_quote(svg.string()) + " >/dev/null";
    if (!memarea::test::topo_built()) {
      // Built without the measurement: refused (exit status 1), saying why, and no SVG written.
      const fs::path err = work / "err.txt";
      EXPECT_EQ(std::system((run + " 2>" + shell_quote(err.string())).c_str()), 1 << 8) << run;
      EXPECT_NE(slurp(err).find(memarea::test::kTopoCompiledOut), std::string::npos)
          << slurp(err);
      EXPECT_FALSE(fs::exists(svg));
      continue;
    }
    ASSERT_EQ(std::system(run.c_str()), 0) << run;
    const parsed p = parse(slurp(svg));
    ASSERT_GT(p.width, 0);
    ASSERT_FALSE(p.texts.empty());
    for (const auto& [i, k] : memarea::cli::svg::overlaps(p.texts))
      ADD_FAILURE() << "\"" << p.texts[i].text << "\" overlaps \"" << p.texts[k].text << "\"";
    for (const auto& t : p.texts)
      EXPECT_TRUE(t.area.x0 >= 0 && t.area.y0 >= 0 && t.area.x1 <= p.width &&
                  t.area.y1 <= p.height)
          << "outside the picture: " << t.text;
    const std::string render = "rsvg-convert -o " + shell_quote(png.string()) + " " +
                               shell_quote(svg.string());
    ASSERT_EQ(std::system(render.c_str()), 0) << render;
    const auto [w, h] = png_size(slurp(png));
    EXPECT_EQ(w, static_cast<std::uint32_t>(p.width));
    EXPECT_EQ(h, static_cast<std::uint32_t>(p.height));
#ifdef MEMAREA_HAVE_ZLIB
    // The texts alone on a transparent page: every inked pixel must fall in a box (one pixel
    // of slack for antialiasing), else the boxes above were smaller than the glyphs.
    const fs::path only_svg = work / "texts.svg", only_png = work / "texts.png";
    std::ofstream(only_svg) << p.text_only;
    const std::string render_texts = "rsvg-convert -o " + shell_quote(only_png.string()) + " " +
                                     shell_quote(only_svg.string());
    ASSERT_EQ(std::system(render_texts.c_str()), 0);
    std::uint32_t aw = 0, ah = 0;
    const auto alpha = png_alpha(slurp(only_png), aw, ah);
    ASSERT_FALSE(alpha.empty()) << "not an 8-bit RGBA PNG";
    int outside = 0;
    for (std::uint32_t y = 0; y < ah; ++y)
      for (std::uint32_t x = 0; x < aw; ++x) {
        if (alpha[std::size_t{y} * aw + x] < 32) continue;
        const double px = x + 0.5, py = y + 0.5;
        const bool inside = std::any_of(p.texts.begin(), p.texts.end(), [&](const text_item& t) {
          return px >= t.area.x0 - 1 && px <= t.area.x1 + 1 && py >= t.area.y0 - 1 &&
                 py <= t.area.y1 + 1;
        });
        if (!inside && ++outside <= 5) {
          const text_item* near = nullptr;
          double best = 1e18;
          for (const auto& t : p.texts) {
            const double dx = std::max({t.area.x0 - px, 0.0, px - t.area.x1}),
                         dy = std::max({t.area.y0 - py, 0.0, py - t.area.y1});
            if (dx * dx + dy * dy < best) best = dx * dx + dy * dy, near = &t;
          }
          ADD_FAILURE() << "ink at (" << x << ", " << y << ") outside every text box; nearest: \""
                        << (near ? near->text : "") << "\"";
        }
      }
    EXPECT_EQ(outside, 0);
#endif
  }
  fs::remove_all(work);
}

}  // namespace
