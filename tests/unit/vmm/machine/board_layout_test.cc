// The board's table (vmm/machine/pc_board.cc, board_slots()) with the virtio layout
// (vmm/machine/board_layout.h): nothing overlaps, no two devices share a line, and the MMIO
// windows stay clear of RAM and the APICs.
#include "vmm/machine/board_layout.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "vmm/kvm/guest_ram_mapping.h"
#include "vmm/machine/pc_board.h"

namespace minivmm::vmm::board {
namespace {

struct NamedWindow {
  std::string name;
  Window window;
};

bool overlaps(Window a, Window b) { return a.base < b.end() && b.base < a.end(); }

TEST(BoardLayoutTest, NoTwoPortWindowsOverlap) {
  std::vector<std::pair<std::string, Ports>> all;
  for (const BoardSlot& s : board_slots()) {
    for (const Ports& p : s.ports) all.emplace_back(std::string(s.name), p);
  }
  ASSERT_GE(all.size(), 10u);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_GT(all[i].second.count, 0u) << all[i].first;
    EXPECT_LE(all[i].second.end(), 0x10000u) << all[i].first;
    for (std::size_t j = i + 1; j < all.size(); ++j) {
      const Ports a = all[i].second, b = all[j].second;
      EXPECT_TRUE(a.end() <= b.base || b.end() <= a.base)
          << all[i].first << " overlaps " << all[j].first;
    }
  }
}

TEST(BoardLayoutTest, EveryLineHasOneDevice) {
  std::set<std::uint32_t> gsis;
  for (const BoardSlot& s : board_slots()) {
    for (std::uint32_t g : s.gsis) EXPECT_TRUE(gsis.insert(g).second) << s.name << " GSI " << g;
  }
  EXPECT_GE(gsis.size(), 5u);
  for (std::uint32_t g : kVirtioGsis) {
    EXPECT_TRUE(gsis.insert(g).second) << "virtio GSI " << g << " is taken";
    EXPECT_LT(g, 16u) << "virtio lines must reach the 8259s too";
    EXPECT_NE(g, 9u) << "the ACPI SCI";
  }
}

TEST(BoardLayoutTest, MmioWindowsLieAboveTheLargestRamAndClearOfTheApics) {
  std::vector<NamedWindow> windows;
  for (std::size_t i = 0; i < kVirtioGsis.size(); ++i) {
    windows.push_back({"virtio " + std::to_string(i), virtio_window(i)});
    if (i > 0) {
      EXPECT_EQ(virtio_window(i).base, virtio_window(i - 1).end());
    }
  }
  for (const BoardSlot& s : board_slots()) {
    if (s.mmio) windows.push_back({std::string(s.name), *s.mmio});
  }
  const Window ioapic{0xfec00000, 0x1000};
  const Window lapic{0xfee00000, 0x1000};
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const Window w = windows[i].window;
    EXPECT_GE(w.base, GuestRamMapping::kMaxBytes) << windows[i].name;
    EXPECT_FALSE(overlaps(w, ioapic) || overlaps(w, lapic)) << windows[i].name;
    for (std::size_t j = i + 1; j < windows.size(); ++j) {
      EXPECT_FALSE(overlaps(w, windows[j].window)) << windows[i].name << " / " << windows[j].name;
    }
  }
}

TEST(BoardLayoutTest, OnlyTheTestDevicesAreOptIn) {
  std::set<std::string> testdev;
  for (const BoardSlot& s : board_slots()) {
    if (s.testdev) testdev.insert(std::string(s.name));
  }
  EXPECT_EQ(testdev, (std::set<std::string>{"fw_cfg", "pc_testdev"}));
}

}  // namespace
}  // namespace minivmm::vmm::board
