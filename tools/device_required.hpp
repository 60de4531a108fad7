// What `memarea topo` and memarea-bench do when there is nothing to measure.
#pragma once

#include <string>

namespace memarea::cli {

/// Throws no_device, with why there is none and how to measure simulated devices, where the
/// active backend has no device: a measuring command would otherwise measure nothing and print
/// an empty table. `what` heads the message ("topo", "bench"); `command` is the command line
/// that measures ("memarea topo", "memarea-bench"), named after MEMAREA_BACKEND=sim
/// MEMAREA_SIM_DEVICES=4. The reason is the one memarea's public API gives for device 0.
void require_a_device(const std::string& what, const std::string& command);

}  // namespace memarea::cli
