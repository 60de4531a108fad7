// The layout of `memarea topo --svg` (tools/topo_svg.cpp), on made-up documents: no two texts
// overlap and none leaves the picture at any device count from 1 to 8, with and without the
// baseline, with long device names and long link labels; colours are anchored so that figures
// within 2% look the same. tests/cli/cli_test.cpp renders real runs with rsvg-convert.
#include "tools/topo_svg.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace {

using memarea::cli::svg::overlaps;
using memarea::cli::svg::picture;
using memarea::cli::svg::shade;
using memarea::cli::svg::topo_picture;

/// A `memarea topo --json` document for n devices, figures of the sizes a GPU gives.
nlohmann::json made_up(int n, bool baseline, const std::string& name, const std::string& link) {
  nlohmann::json j;
  j["backend"] = "cuda";
  j["size"] = 256 << 20;
  j["reps"] = 10;
  j["trials"] = 3;
  for (int d = 0; d < n; ++d)
    j["devices"].push_back({{"ordinal", d}, {"name", name}, {"pci_bus_id", "0000:19:00.0"}});
  auto matrix = [n](double v) {
    nlohmann::json m = nlohmann::json::array();
    for (int a = 0; a < n; ++a) {
      nlohmann::json row = nlohmann::json::array();
      for (int b = 0; b < n; ++b) row.push_back(a == b ? nlohmann::json() : nlohmann::json(v + a + b));
      m.push_back(row);
    }
    return m;
  };
  auto vec = [n](double v) {
    nlohmann::json x = nlohmann::json::array();
    for (int d = 0; d < n; ++d) x.push_back(v + d);
    return x;
  };
  nlohmann::json links = nlohmann::json::array();
  for (int a = 0; a < n; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < n; ++b) row.push_back(a == b ? "-" : link);
    links.push_back(row);
  }
  j["link"] = links;
  j["link_nominal_gbps"] = matrix(478.1);
  j["host_link"] = nlohmann::json::array();
  for (int d = 0; d < n; ++d) j["host_link"].push_back("PCIe Gen5 x16");
  j["host_link_nominal_gbps"] = vec(63.0);
  j["link_legend"] = {{link, "a long explanation of what this link label means, as wide as a "
                             "sentence gets"},
                      {"PCIe Gen5 x16", "host link: PCIe generation 5, 16 lanes"}};
  auto figures = [&](double scale) {
    return nlohmann::json{{"unidirectional_gbps", matrix(394.3 * scale)},
                          {"bidirectional_gbps", matrix(12780.4 * scale)},
                          {"latency_4k_us", matrix(3.04 * scale)},
                          {"latency_4k_sync_us", matrix(7.4 * scale)},
                          {"host_to_device_gbps", vec(55.4 * scale)},
                          {"device_to_host_gbps", vec(55.3 * scale)},
                          {"host_to_device_latency_4k_us", vec(2.5 * scale)},
                          {"device_to_host_latency_4k_us", vec(2.6 * scale)}};
  };
  j.update(figures(1.0));
  j["all_pairs_at_once_gbps"] = matrix(140.2);
  j["all_pairs_at_once_total_gbps"] = n > 1 ? nlohmann::json(1234.5) : nlohmann::json();
  if (baseline) j["raw"] = figures(1.01);
  return j;
}

void expect_clean(const picture& p, const std::string& what) {
  ASSERT_FALSE(p.texts.empty()) << what;
  for (const auto& [i, k] : overlaps(p.texts))
    ADD_FAILURE() << what << ": \"" << p.texts[i].text << "\" overlaps \"" << p.texts[k].text
                  << "\"";
  for (const auto& t : p.texts) {
    EXPECT_GE(t.area.x0, 0) << what << ": " << t.text;
    EXPECT_GE(t.area.y0, 0) << what << ": " << t.text;
    EXPECT_LE(t.area.x1, p.width) << what << ": " << t.text;
    EXPECT_LE(t.area.y1, p.height) << what << ": " << t.text;
  }
  EXPECT_EQ(p.svg.find("?</text>"), std::string::npos) << what << ": a bare question mark";
}

TEST(TopoSvg, NoTextsOverlapAtAnyDeviceCount) {
  for (int n = 1; n <= 8; ++n)
    for (bool baseline : {false, true})
      for (const auto& [name, link] :
           {std::pair<std::string, std::string>{"NVIDIA H200", "NV18"},
            {"NVIDIA H100 80GB HBM3 with a very long marketing name", "unknown (no NVML)"}}) {
        const auto what = "n=" + std::to_string(n) + (baseline ? " baseline " : " ") + link;
        expect_clean(topo_picture(made_up(n, baseline, name, link)), what);
      }
}

TEST(TopoSvg, OneDeviceShowsTheHostRowNotEmptyPanels) {
  const auto p = topo_picture(made_up(1, false, "NVIDIA H200", "NV18"));
  EXPECT_NE(p.svg.find("Host \u2194 device"), std::string::npos);
  EXPECT_NE(p.svg.find("data-cell=\"host\""), std::string::npos);
  EXPECT_EQ(p.svg.find("data-cell=\"peer\""), std::string::npos);
  EXPECT_NE(p.svg.find("no device pairs"), std::string::npos);
  EXPECT_NE(p.svg.find(">55.4</text>"), std::string::npos) << "the H2D figure";
}

TEST(TopoSvg, EveryPictureHasTheHostRowAndEachPairsCell) {
  const auto p = topo_picture(made_up(4, true, "NVIDIA H200", "NV18"));
  std::size_t host = 0, peer = 0;
  for (auto at = p.svg.find("data-cell="); at != std::string::npos;
       at = p.svg.find("data-cell=", at + 1))
    (p.svg.compare(at, 16, "data-cell=\"host\"") == 0 ? host : peer)++;
  EXPECT_EQ(host, 4u * 4u);  // four figures per device
  EXPECT_EQ(peer, 4u * 16u); // four panels of 4 x 4
  EXPECT_NE(p.svg.find(">raw "), std::string::npos);
  EXPECT_NE(p.svg.find("NV18: a long explanation"), std::string::npos) << "the legend";
}

TEST(TopoSvg, ShadesAreAnchoredSoThatSmallDifferencesLookTheSame) {
  // 394.3 and 394.6 GB/s against NV18's 478 GB/s: the same shade, or one 2% step apart.
  EXPECT_LE(std::abs(shade(394.3, 478.1, false) - shade(394.6, 478.1, false)), 0.02 + 1e-9);
  // Against the best cell (no nominal peak): the same.
  EXPECT_LE(std::abs(shade(394.3, 394.6, false) - 1.0), 0.02 + 1e-9);
  // A real difference shows: half the bandwidth is half the shade.
  EXPECT_NEAR(shade(239.0, 478.0, false), 0.5, 0.011);
  // Latency: the best cell is darkest, twice the latency half as dark.
  EXPECT_EQ(shade(3.0, 3.0, true), 1.0);
  EXPECT_NEAR(shade(6.0, 3.0, true), 0.5, 0.011);
  // Steps of 2%.
  for (double v = 1; v < 500; v += 7.3) {
    const double s = shade(v, 478.1, false);
    EXPECT_NEAR(s * 50, std::round(s * 50), 1e-9);
  }
  EXPECT_EQ(shade(NAN, 478.1, false), 0.0);
}

TEST(TopoSvg, TextWidthIsGenerous) {
  using memarea::cli::svg::text_width;
  // DejaVu Sans at 12 px: "394.6" is 5 glyphs of 0.636 em or less, about 36 px.
  EXPECT_GE(text_width("394.6", 12, false), 36.0);
  EXPECT_GT(text_width("W", 12, true), text_width("W", 12, false));
  EXPECT_GE(text_width("\u00b5s", 10, false), 10.0);  // two characters, one of two bytes
}

}  // namespace
