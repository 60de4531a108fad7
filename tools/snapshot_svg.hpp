// `memarea snapshot --svg`: the picture of a memarea_snapshot_json document. One band per
// device: its blocks side by side, each as wide as log2 of its size (so a 1 GiB block and a
// 2 MiB one are both readable), a pool block's pieces inside it to the block's own linear
// scale, coloured by kind or by age; a legend; the largest users named under each band.
// Every rectangle carries data-band and data-layer attributes so that tests can check that
// no two of one band and layer overlap (tests/cli/snapshot_svg_check.py).
#pragma once

#include "tools/topo_svg.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace memarea::cli::svg {

/// How a snapshot picture colours allocations.
enum class snapshot_colour { kind, age };

/// The picture of a snapshot document.
picture snapshot_picture(const nlohmann::json& snapshot, snapshot_colour by);

}  // namespace memarea::cli::svg
