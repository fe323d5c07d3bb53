// QEMU's pc-testdev echo register (hw/misc/pc-testdev.c "pc_testdev_ioport"): one 32-bit
// register behind ports 0xe0-0xe3, and the same register again behind 0xe8-0xeb (QEMU's
// "ioport-byte" alias, which QEMU splits into byte accesses; the result is the same). Not a chip;
// kvm-unit-tests' emulator and realmode tests check that an I/O write of any width and offset
// reads back (string I/O, `in`/`out` with imm8 and %dx).
//
// A write of width w at offset o replaces bytes o..o+w-1 of the register (wrapping within the
// register is not possible: QEMU's mask drops bytes past offset 3, as we do); a read returns the
// same bytes. Every width 1, 2, 4 is valid; others are counted and ignored (reads all ones).
//
// Threads: any vCPU thread; the register is one atomic word, so no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/port_io_device.h"

namespace minivmm::devices {

class PcTestdevPort final : public PortIoDevice {
 public:
  static constexpr std::uint16_t kPortCount = 4;

  std::string_view name() const noexcept override { return "pc_testdev_ioport"; }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  std::uint32_t value() const noexcept { return data_.load(); }
  std::uint64_t bad_accesses() const noexcept { return bad_accesses_.load(); }

  // Part of PcTestdev's snapshot record (pc_testdev_state.cc).
  void save_state(StateWriter& out) const;
  void load_state(StateReader& in);

 private:
  std::atomic<std::uint32_t> data_{0};
  std::atomic<std::uint64_t> bad_accesses_{0};
};

}  // namespace minivmm::devices
