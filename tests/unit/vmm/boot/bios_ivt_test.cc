// The real-mode IVT a BIOS leaves: every vector reaches an IRET, but the timer's (0x08), which
// reaches the INT 08h handler.
#include "vmm/boot/bios_ivt.h"

#include <gtest/gtest.h>

#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm {
namespace {

using testing::kMiB;
using testing::TestRam;
using testing::throws_boot_error;

TEST(BiosIvtTest, EveryVectorButTheTimersPointsAtTheIretInTheBiosArea) {
  TestRam ram(2 * kMiB);
  write_bios_ivt(ram.mem());
  for (std::uint64_t v = 0; v < 256; ++v) {
    if (v == kBiosTimerVector) continue;
    EXPECT_EQ(ram.read<std::uint16_t>(v * 4), 0xff53) << "offset of vector " << v;
    EXPECT_EQ(ram.read<std::uint16_t>(v * 4 + 2), 0xf000) << "segment of vector " << v;
  }
  // F000:FF53 = 0xf0000 + 0xff53 (real-mode address = segment * 16 + offset).
  EXPECT_EQ(ram.read<std::uint8_t>(0xfff53), 0xcf) << "IRET";
}

TEST(BiosIvtTest, TimerVectorReachesAHandlerThatCountsTheTickAndSendsEoi) {
  TestRam ram(2 * kMiB);
  write_bios_ivt(ram.mem());
  // F000:FEA5, where the IBM PC/AT BIOS has its INT 08h.
  EXPECT_EQ(ram.read<std::uint16_t>(8 * 4), 0xfea5);
  EXPECT_EQ(ram.read<std::uint16_t>(8 * 4 + 2), 0xf000);
  const std::uint64_t h = 0xffea5;
  EXPECT_EQ(ram.read<std::uint8_t>(h), 0x50) << "push ax first: the handler preserves AX";
  // inc word [0x046c]: the BIOS data area's tick count.
  bool counts = false, eoi = false;
  for (std::uint64_t i = h; i + 4 <= h + 26; ++i) {
    if (ram.read<std::uint8_t>(i) == 0xff && ram.read<std::uint8_t>(i + 1) == 0x06 &&
        ram.read<std::uint16_t>(i + 2) == 0x046c) {
      counts = true;
    }
    // mov al, 0x20; out 0x20, al
    if (ram.read<std::uint8_t>(i) == 0xb0 && ram.read<std::uint8_t>(i + 1) == 0x20 &&
        ram.read<std::uint8_t>(i + 2) == 0xe6 && ram.read<std::uint8_t>(i + 3) == 0x20) {
      eoi = true;
    }
  }
  EXPECT_TRUE(counts);
  EXPECT_TRUE(eoi);
  // ...and ends in pop ax; iret before the padding.
  EXPECT_EQ(ram.read<std::uint8_t>(h + 21), 0x58);
  EXPECT_EQ(ram.read<std::uint8_t>(h + 22), 0xcf);
  // The handler lies below the shared IRET and does not overlap it.
  EXPECT_LT(h + 26, 0xfff53u);
}

TEST(BiosIvtTest, NothingPastTheTableIsWritten) {
  TestRam ram(2 * kMiB);
  ram.mem().fill(0x400, 0x100, std::byte{0xaa});  // the BIOS data area stays the caller's
  write_bios_ivt(ram.mem());
  EXPECT_EQ(ram.read<std::uint8_t>(0x400), 0xaa);
  EXPECT_EQ(ram.read<std::uint8_t>(0x4ff), 0xaa);
}

TEST(BiosIvtTest, RamWithoutBiosAreaIsRejected) {
  TestRam ram(512 * 1024);
  EXPECT_TRUE(throws_boot_error([&] { write_bios_ivt(ram.mem()); }, "BIOS area"));
}

}  // namespace
}  // namespace minivmm::vmm
