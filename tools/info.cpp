// `memarea info`: backends found or not (and why), devices and their properties, host NUMA nodes.
#include "tools/commands.hpp"

#include <memarea/error.hpp>
#include <memarea/report.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

namespace memarea::cli {

namespace {

std::string gib(std::size_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace

// Built in the library and served by its C API, which the Python package's memarea.info() calls
// too: one document.
nlohmann::json info_json() {
  char* text = nullptr;
  if (const memarea_status st = memarea_info_json(&text); st != MEMAREA_SUCCESS)
    throw error(static_cast<errc>(st), memarea_last_error_message());
  nlohmann::json j = nlohmann::json::parse(text);
  memarea_string_free(text);
  return j;
}

int run_info(bool json) {
  auto j = info_json();
  if (json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("memarea {}\n\nBackends:\n", j["memarea_version"].get<std::string>());
  for (auto& b : j["backends"]) {
    std::cout << fmt::format("  {:<5} {:<7} devices: {}{}{}\n", b["name"].get<std::string>(),
                             b["active"].get<bool>() ? "active" : "",
                             b["devices"].get<int>(),
                             b["version"].get<std::string>().empty()
                                 ? ""
                                 : "  (" + b["version"].get<std::string>() + ")",
                             b["reason"].get<std::string>().empty()
                                 ? ""
                                 : "\n        why: " + b["reason"].get<std::string>());
  }
  std::cout << fmt::format("\nDevices ({} backend): {}\n", j["backend"].get<std::string>(),
                           j["devices"].size());
  for (auto& d : j["devices"]) {
    std::cout << fmt::format("  [{}] {}  pci {}  cc {}\n", d["ordinal"].get<int>(),
                             d["name"].get<std::string>(), d["pci_bus_id"].get<std::string>(),
                             d["compute_capability"].get<std::string>());
    std::cout << fmt::format("      memory {} total, {} free\n",
                             gib(d["total_memory"].get<std::size_t>()),
                             gib(d["free_memory"].get<std::size_t>()));
    std::string flags;
    for (const char* k : {"unified_addressing", "managed_memory", "concurrent_managed_access",
                          "pageable_memory_access", "can_map_host_memory",
                          "virtual_memory_management", "ipc"}) {
      flags += fmt::format(" {}={}", k, d[k].get<bool>() ? 1 : 0);
    }
    std::cout << "     " << flags << "\n";
  }
  std::cout << fmt::format("\nHost NUMA nodes ({}):\n",
                           j["host"]["numa_available"].get<bool>() ? "NUMA available"
                                                                   : "NUMA unavailable");
  for (auto& n : j["host"]["numa_nodes"]) {
    std::cout << fmt::format("  node {}: {} total, {} free, {} CPUs\n", n["id"].get<int>(),
                             gib(n["total_memory"].get<std::size_t>()),
                             gib(n["free_memory"].get<std::size_t>()), n["cpus"].size());
  }
  // No device: say how to try memarea anyway (the sim backend needs no hardware). The command
  // names the backend, so it works whatever MEMAREA_BACKEND the reader has set.
  if (j["devices"].empty())
    std::cout << fmt::format("\nNo device in the {} backend. To try memarea without a GPU: "
                             "MEMAREA_BACKEND=sim MEMAREA_SIM_DEVICES=4 memarea topo\n",
                             j["backend"].get<std::string>());
  return 0;
}

}  // namespace memarea::cli
