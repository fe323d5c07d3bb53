// libFuzzer target: isa-debug-exit and the POST code port, fed a stream of port accesses, time
// advances and host calls (input format: fuzz_ops.h; what is checked: debug_exit_post_port_rig.h).
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "tests/fuzz/debug_exit_post_port_rig.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // Guest-error logging is rate-limited per device, but formatting it still costs more than the
  // device call it reports.
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace minivmm::fuzz;
  run_twins(data, size, [](std::uint8_t config) {
    return std::make_unique<DeviceTarget<DebugPortsRig>>(config);
  });
  return 0;
}
