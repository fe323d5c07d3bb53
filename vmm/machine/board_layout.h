// Where the virtio-mmio devices sit, and the shapes of the board's addresses. The legacy and
// test devices' places are their slots in the board's table (pc_board.cc, board_slots());
// tests/unit/vmm/machine/board_layout_test.cc checks the two together: no two port windows
// overlap, no two devices share a GSI, and every MMIO window stays above the largest RAM and
// clear of the APICs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace minivmm::vmm::board {

struct Ports {
  std::uint16_t base;
  std::uint16_t count;
  constexpr std::uint32_t end() const { return std::uint32_t{base} + count; }
};

struct Window {
  std::uint64_t base;
  std::uint64_t size;
  constexpr std::uint64_t end() const { return base + size; }
};

// --- virtio-mmio (devices/virtio/): device i has window i (4 KiB each from kVirtioFirst: RAM
// ends at 3 GiB at most; the IOAPIC and LAPIC sit at 0xfec00000 and 0xfee00000) and the i-th
// GSI below, the ISA inputs no legacy device uses (the ACPI SCI is 9; 3, 14 and 15 belong to a
// second UART and the IDE channels a PC has and this board does not). Linux finds each
// through `virtio_mmio.device=4K@0xd0000000:5` on its command line.
inline constexpr Window kVirtioFirst{0xd0000000, 0x1000};
inline constexpr std::array<std::uint32_t, 8> kVirtioGsis{5, 6, 7, 10, 11, 3, 14, 15};

constexpr Window virtio_window(std::size_t i) {
  return {kVirtioFirst.base + i * kVirtioFirst.size, kVirtioFirst.size};
}

}  // namespace minivmm::vmm::board
