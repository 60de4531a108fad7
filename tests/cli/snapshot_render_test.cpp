// The snapshot picture (tools/snapshot_svg.hpp) of real allocations on 8 sim devices (pool
// blocks with pieces, areas of 2 MiB beside 64 MiB (the sim.s memory is small), host memory), cut to 1, 4 and 8 devices and
// coloured by kind and by age: no two rectangles of one band and layer overlap, every text
// stays inside the picture, and rsvg-convert (librsvg2-bin) renders a PNG of it, written to
// the build tree (tests/snapshot-render/) for a look by eye. Rendering is skipped, saying so,
// where rsvg-convert is missing; the overlap checks run anyway.
#include "tools/snapshot_svg.hpp"

#include <memarea/memarea.h>
#include <memarea/report.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace memarea::cli::svg;

struct drawn {
  int band;
  std::string layer;
  double x0, y0, x1, y1;
};

/// The rectangles of a band (data-band >= 0), read back from the SVG text.
std::vector<drawn> rects(const std::string& svg) {
  std::vector<drawn> out;
  const std::regex re(
      R"re(<rect x="([-0-9.]+)" y="([-0-9.]+)" width="([-0-9.]+)" height="([-0-9.]+)"[^>]*data-band="(-?\d+)" data-layer="(\w+)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it) {
    const auto& m = *it;
    const double x = std::stod(m[1]), y = std::stod(m[2]), w = std::stod(m[3]), h = std::stod(m[4]);
    EXPECT_GE(w, 0.0);
    out.push_back({std::stoi(m[5]), m[6], x, y, x + w, y + h});
  }
  return out;
}

nlohmann::json take_snapshot() {
  char* s = nullptr;
  EXPECT_EQ(memarea_snapshot_json(&s, -1), MEMAREA_SUCCESS);
  auto j = nlohmann::json::parse(s ? s : "{}");
  memarea_string_free(s);
  return j;
}

void check(const picture& p, const std::string& name) {
  const auto rs = rects(p.svg);
  ASSERT_FALSE(rs.empty());
  for (std::size_t i = 0; i < rs.size(); ++i) {
    EXPECT_GE(rs[i].x0, 0.0) << name;
    EXPECT_LE(rs[i].x1, p.width + 1e-6) << name;
    EXPECT_LE(rs[i].y1, p.height + 1e-6) << name;
    for (std::size_t k = i + 1; k < rs.size(); ++k) {
      const auto &a = rs[i], &b = rs[k];
      if (a.band != b.band || a.layer != b.layer) continue;
      const double ow = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
      const double oh = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
      // The SVG writes two decimals: edges that meet may cross by a rounding step.
      EXPECT_FALSE(ow > 0.011 && oh > 0.011)
          << name << ": band " << a.band << " " << a.layer << " rectangles " << i << " and " << k
          << " overlap";
    }
  }
  for (const auto& t : p.texts) {
    EXPECT_GE(t.area.x0, 0.0) << name << ": " << t.text;
    EXPECT_LE(t.area.x1, p.width) << name << ": " << t.text;
    EXPECT_GE(t.area.y0, 0.0) << name << ": " << t.text;
    EXPECT_LE(t.area.y1, p.height) << name << ": " << t.text;
  }
  EXPECT_TRUE(overlaps(p.texts).empty()) << name;
  const fs::path dir = MEMAREA_SNAPSHOT_PNG_DIR;
  fs::create_directories(dir);
  const fs::path svg = dir / (name + ".svg"), png = dir / (name + ".png");
  std::ofstream(svg) << p.svg;
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
    std::cout << "rsvg-convert is missing (Debian: librsvg2-bin): " << name << " not rendered\n";
    return;
  }
  const std::string cmd = "rsvg-convert -o '" + png.string() + "' '" + svg.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_TRUE(fs::exists(png) && fs::file_size(png) > 0) << png;
}

}  // namespace

TEST(SnapshotRender, OneFourAndEightDevices) {
  int n = 0;
  ASSERT_EQ(memarea_get_device_count(&n), MEMAREA_SUCCESS);
  ASSERT_GE(n, 1);
  ASSERT_EQ(memarea_set_tracking(1), MEMAREA_SUCCESS);
  std::vector<memarea_area_t> areas(n);
  std::vector<memarea_pool_t> pools(n);
  std::vector<std::pair<int, void*>> big, small, pieces;
  for (int d = 0; d < n; ++d) {
    ASSERT_EQ(memarea_area_create(&areas[d], d, 0), MEMAREA_SUCCESS);
    void* p = nullptr;
    ASSERT_EQ(memarea_area_mmap(areas[d], &p, std::size_t{2} << 20, nullptr), MEMAREA_SUCCESS);
    small.push_back({d, p});
    if (d % 2 == 0) {
      ASSERT_EQ(memarea_area_mmap(areas[d], &p, std::size_t{64} << 20, nullptr), MEMAREA_SUCCESS);
      big.push_back({d, p});
    }
    ASSERT_EQ(memarea_pool_create(&pools[d], areas[d], nullptr), MEMAREA_SUCCESS);
    for (int i = 0; i < 3 + d; ++i) {
      ASSERT_EQ(memarea_pool_alloc(pools[d], &p, (std::size_t{1} << 16) << i, nullptr),
                MEMAREA_SUCCESS);
      pieces.push_back({d, p});
    }
  }
  void* h = nullptr;
  ASSERT_EQ(memarea_host_malloc(&h, std::size_t{8} << 20, -1), MEMAREA_SUCCESS);
  const nlohmann::json all = take_snapshot();
  // This program exports no symbols: its allocations are named by the object they came from.
  for (const auto& d : all["devices"]) {
    ASSERT_FALSE(d["largest_users"].empty()) << d["device"];
    for (const auto& u : d["largest_users"])
      EXPECT_EQ(u["user"].get<std::string>().rfind("? in memarea_snapshot_svg_tests", 0), 0u)
          << u["user"];
  }
  for (int want : {1, 4, 8}) {
    if (want > n) continue;
    nlohmann::json cut = all;
    cut["devices"] = nlohmann::json::array();
    for (const auto& d : all["devices"])
      if (d["device"].get<int>() < want) cut["devices"].push_back(d);
    check(snapshot_picture(cut, snapshot_colour::kind), "snapshot-" + std::to_string(want) + "-kind");
    check(snapshot_picture(cut, snapshot_colour::age), "snapshot-" + std::to_string(want) + "-age");
  }
  check(snapshot_picture(all, snapshot_colour::kind), "snapshot-all-kind");
  for (auto [d, p] : pieces) EXPECT_EQ(memarea_pool_free(pools[d], p, nullptr), MEMAREA_SUCCESS);
  for (auto [d, p] : small) EXPECT_EQ(memarea_area_munmap(areas[d], p, std::size_t{2} << 20), MEMAREA_SUCCESS);
  for (auto [d, p] : big) EXPECT_EQ(memarea_area_munmap(areas[d], p, std::size_t{64} << 20), MEMAREA_SUCCESS);
  for (int d = 0; d < n; ++d) {
    EXPECT_EQ(memarea_pool_destroy(pools[d]), MEMAREA_SUCCESS);
    EXPECT_EQ(memarea_area_destroy(areas[d]), MEMAREA_SUCCESS);
  }
  EXPECT_EQ(memarea_free(h), MEMAREA_SUCCESS);
  memarea_set_tracking(0);
}

// The age legend reads the oldest allocation's age and half of it in a unit that shows their
// digits: seconds from 1 s, milliseconds from 1 ms, microseconds below.
TEST(SnapshotRender, TheAgeLegendTakesAUnitThatShowsItsDigits) {
  memarea_set_tracking(1);
  memarea_area_t area = nullptr;
  ASSERT_EQ(memarea_area_create(&area, 0, 0), MEMAREA_SUCCESS);
  void* p = nullptr;
  ASSERT_EQ(memarea_area_mmap(area, &p, std::size_t{1} << 20, nullptr), MEMAREA_SUCCESS);
  const nlohmann::json taken = take_snapshot();
  auto legend_of = [&](double age) {
    nlohmann::json snap = taken;
    for (auto& d : snap["devices"])
      for (auto& b : d["blocks"]) {
        if (b.contains("track")) b["track"]["age_s"] = age;
        if (b.contains("pieces"))
          for (auto& piece : b["pieces"]) piece["track"]["age_s"] = age;
      }
    std::vector<std::string> out;
    for (const auto& t : snapshot_picture(snap, snapshot_colour::age).texts)
      if (t.text.find("(oldest)") != std::string::npos || t.text.find(" s") != std::string::npos ||
          t.text.find(" ms") != std::string::npos || t.text.find(" us") != std::string::npos)
        out.push_back(t.text);
    return out;
  };
  auto has = [](const std::vector<std::string>& texts, const std::string& want) {
    return std::find(texts.begin(), texts.end(), want) != texts.end();
  };
  const auto seconds = legend_of(5.0), millis = legend_of(0.5), micros = legend_of(0.0004);
  EXPECT_TRUE(has(seconds, "5.0 s (oldest)") && has(seconds, "2.5 s")) << seconds.size();
  EXPECT_TRUE(has(millis, "500 ms (oldest)") && has(millis, "250 ms")) << millis.size();
  EXPECT_TRUE(has(micros, "400 us (oldest)") && has(micros, "200 us")) << micros.size();
  EXPECT_EQ(memarea_area_munmap(area, p, std::size_t{1} << 20), MEMAREA_SUCCESS);
  EXPECT_EQ(memarea_area_destroy(area), MEMAREA_SUCCESS);
  memarea_set_tracking(0);
}
