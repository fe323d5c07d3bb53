// The board's one table of ports, MMIO windows and GSIs (vmm/machine/board_layout.h): nothing
// overlaps, no two devices share a line, and the MMIO windows stay clear of RAM and the APICs.
#include "vmm/machine/board_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "vmm/kvm/guest_ram_mapping.h"

namespace minivmm::vmm::board {
namespace {

TEST(BoardLayoutTest, NoTwoPortWindowsOverlap) {
  for (std::size_t i = 0; i < kAllPorts.size(); ++i) {
    EXPECT_GT(kAllPorts[i].ports.count, 0u) << kAllPorts[i].name;
    EXPECT_LE(kAllPorts[i].ports.end(), 0x10000u) << kAllPorts[i].name;
    for (std::size_t j = i + 1; j < kAllPorts.size(); ++j) {
      const Ports a = kAllPorts[i].ports, b = kAllPorts[j].ports;
      EXPECT_TRUE(a.end() <= b.base || b.end() <= a.base)
          << kAllPorts[i].name << " overlaps " << kAllPorts[j].name;
    }
  }
}

TEST(BoardLayoutTest, EveryLineHasOneDevice) {
  std::set<std::uint32_t> gsis{kPitGsi, kKeyboardGsi, kCom1Gsi, kRtcGsi, kMouseGsi};
  EXPECT_EQ(gsis.size(), 5u);
  for (std::uint32_t g : kVirtioGsis) {
    EXPECT_TRUE(gsis.insert(g).second) << "GSI " << g << " is taken";
    EXPECT_LT(g, 16u) << "virtio lines must reach the 8259s too";
    EXPECT_NE(g, 9u) << "the ACPI SCI";
  }
}

bool overlaps(Window a, Window b) { return a.base < b.end() && b.base < a.end(); }

TEST(BoardLayoutTest, MmioWindowsLieAboveTheLargestRamAndClearOfTheApics) {
  const Window ioapic{0xfec00000, 0x1000};
  const Window lapic{0xfee00000, 0x1000};
  for (std::size_t i = 0; i < kVirtioGsis.size(); ++i) {
    const Window w = virtio_window(i);
    EXPECT_GE(w.base, GuestRamMapping::kMaxBytes) << "virtio window " << i;
    EXPECT_FALSE(overlaps(w, ioapic) || overlaps(w, lapic) || overlaps(w, kTestdevIomem)) << i;
    if (i > 0) EXPECT_EQ(w.base, virtio_window(i - 1).end());
  }
  EXPECT_GE(kTestdevIomem.base, GuestRamMapping::kMaxBytes);
  EXPECT_FALSE(overlaps(kTestdevIomem, ioapic) || overlaps(kTestdevIomem, lapic));
}

}  // namespace
}  // namespace minivmm::vmm::board
