// libFuzzer harness: the settings memarea reads from the environment (sizes such as
// MEMAREA_SIM_DEVICE_MEMORY, peer groups). Each must parse or throw memarea::error, never crash.
#include "driver/sim/sim_config.hpp"

#include <memarea/error.hpp>

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] & 1)
      (void)memarea::detail::parse_size(text, "MEMAREA_SIM_DEVICE_MEMORY");
    else
      (void)memarea::detail::parse_peer_groups(text, 1 + data[0] % 16);
  } catch (const memarea::error&) {
  }
  return 0;
}
