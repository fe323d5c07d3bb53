// QEMU's pc-testdev "iomem" (hw/misc/pc-testdev.c): 64 KiB at guest physical 0xff000000 that
// reads back what was written, but through MMIO exits instead of RAM. kvm-unit-tests maps it as
// IORAM_BASE_PHYS (lib/x86/ioram.h) to make KVM emulate an instruction's memory operand: the
// emulator and lam tests run `mov` and friends against it and compare the result with RAM's.
//
// Accesses of 1, 2, 4 or 8 bytes at any offset, little-endian like the bus. Bytes past the end
// (an access straddling it) read as all ones and are dropped on write, and are counted.
//
// Threads: any vCPU thread; one mutex (the suite's SMP tests may touch it from several vCPUs).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/mmio_device.h"

namespace minivmm::devices {

class PcTestdevIomem final : public MmioDevice {
 public:
  static constexpr std::uint64_t kSize = 0x10000;

  std::string_view name() const noexcept override { return "pc_testdev_iomem"; }
  void read(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint64_t offset, std::span<const std::uint8_t> data) noexcept override;

  std::uint64_t reads() const noexcept { return reads_.load(); }
  std::uint64_t writes() const noexcept { return writes_.load(); }
  std::uint64_t bad_accesses() const noexcept { return bad_accesses_.load(); }

  // Part of PcTestdev's snapshot record (pc_testdev_state.cc).
  void save_state(StateWriter& out) const;
  void load_state(StateReader& in);

 private:
  mutable std::mutex mu_;
  std::array<std::uint8_t, kSize> buf_{};
  std::atomic<std::uint64_t> reads_{0};
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<std::uint64_t> bad_accesses_{0};
};

}  // namespace minivmm::devices
