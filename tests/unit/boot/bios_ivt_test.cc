// The real-mode IVT a BIOS leaves: every vector reaches an IRET.
#include "vmm/boot/bios_ivt.h"

#include <gtest/gtest.h>

#include "tests/unit/boot/test_ram.h"

namespace minivmm::vmm {
namespace {

using testing::kMiB;
using testing::TestRam;
using testing::throws_boot_error;

TEST(BiosIvtTest, EveryVectorPointsAtTheIretInTheBiosArea) {
  TestRam ram(2 * kMiB);
  write_bios_ivt(ram.mem());
  for (std::uint64_t v = 0; v < 256; ++v) {
    EXPECT_EQ(ram.read<std::uint16_t>(v * 4), 0xff53) << "offset of vector " << v;
    EXPECT_EQ(ram.read<std::uint16_t>(v * 4 + 2), 0xf000) << "segment of vector " << v;
  }
  // F000:FF53 = 0xf0000 + 0xff53 (real-mode address = segment * 16 + offset).
  EXPECT_EQ(ram.read<std::uint8_t>(0xfff53), 0xcf) << "IRET";
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
