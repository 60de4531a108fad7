// `memarea topo --svg`: the picture of a `memarea topo --json` document, laid out so that no
// two texts overlap at any device count. The layout knows the box of every text it places (its
// width estimated generously from the characters and font size), so tests can check them
// pairwise (tests/cli/topo_svg_test.cpp) and against a real renderer's ink (tests/cli).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace memarea::cli::svg {

/// A rectangle in SVG pixels: x0 <= x1, y0 <= y1.
struct box {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

/// One text the picture holds and the box its glyphs stay inside.
struct text_item {
  box area;
  std::string text;
};

/// An SVG document and what it holds.
struct picture {
  std::string svg;
  double width = 0, height = 0;
  std::vector<text_item> texts;
};

/// Width in pixels that `text` (UTF-8) takes at `size` px in the sans-serif fonts renderers
/// pick (DejaVu Sans, Liberation Sans, Arial), rounded up: DejaVu Sans's advances plus 8%.
double text_width(const std::string& text, double size, bool bold);

/// The box of a text element as SVG places it: `anchor` is "start", "middle" or "end"; y is
/// the baseline.
box text_box(const std::string& text, double x, double y, double size, const std::string& anchor,
             bool bold);

/// s with &, <, > and " written as XML entities (for text and attribute values).
std::string xml_escape(const std::string& s);

/// The picture of a `memarea topo --json` document.
picture topo_picture(const nlohmann::json& topo);

/// The pairs (i, j), i < j, of texts whose boxes overlap.
std::vector<std::pair<std::size_t, std::size_t>> overlaps(const std::vector<text_item>& texts);

/// A cell's shade, 0 (white) to 1 (deepest), in steps of 2% so that figures within 2% of each
/// other look the same: value / reference for "higher is better", reference / value for "lower
/// is better" (reference: the best cell, or the link's nominal peak). NaN: 0.
double shade(double value, double reference, bool lower_is_better);

}  // namespace memarea::cli::svg
