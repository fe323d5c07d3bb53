// libFuzzer target: the i8042 keyboard controller and its one-port views, fed a stream of port
// accesses, time advances and host calls (input format: fuzz_ops.h; what is checked: i8042_rig.h).
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/i8042_rig.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Guest-error logging is rate-limited per device, but formatting it still costs more than the
  // device call it reports.
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace minivmm::fuzz;
  run_twins(data, size,
            [](std::uint8_t config) { return std::make_unique<DeviceTarget<I8042Rig>>(config); });
  return 0;
}
