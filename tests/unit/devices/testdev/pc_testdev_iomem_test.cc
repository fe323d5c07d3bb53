// pc-testdev's iomem: memory that lives behind MMIO exits (QEMU hw/misc/pc-testdev.c).
#include "devices/testdev/pc_testdev_iomem.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>

namespace minivmm::devices {
namespace {

template <std::size_t N>
std::array<std::uint8_t, N> read_at(PcTestdevIomem& dev, std::uint64_t offset) {
  std::array<std::uint8_t, N> out{};
  dev.read(offset, out);
  return out;
}

TEST(PcTestdevIomemTest, SitsWhereKvmUnitTestsLooksForIt) {
  EXPECT_EQ(PcTestdevIomem::kSize, 0x10000u);     // QEMU's IOMEM_LEN
}

TEST(PcTestdevIomemTest, StartsZeroedAndReadsBackEveryWidth) {
  PcTestdevIomem dev;
  EXPECT_EQ((read_at<8>(dev, 0x100)), (std::array<std::uint8_t, 8>{}));
  const std::uint64_t value = 0x0123456789abcdefull;  // kvm-unit-tests' lam/emulator pattern
  std::array<std::uint8_t, 8> bytes{};
  std::memcpy(bytes.data(), &value, 8);
  dev.write(0x1000, bytes);
  EXPECT_EQ((read_at<8>(dev, 0x1000)), bytes);
  // Narrower reads see the same little-endian bytes.
  EXPECT_EQ((read_at<4>(dev, 0x1000)), (std::array<std::uint8_t, 4>{0xef, 0xcd, 0xab, 0x89}));
  EXPECT_EQ((read_at<2>(dev, 0x1004)), (std::array<std::uint8_t, 2>{0x67, 0x45}));
  EXPECT_EQ((read_at<1>(dev, 0x1007)), (std::array<std::uint8_t, 1>{0x01}));
  // A byte write changes one byte only.
  const std::array<std::uint8_t, 1> b{0x5a};
  dev.write(0x1003, b);
  EXPECT_EQ((read_at<4>(dev, 0x1000)), (std::array<std::uint8_t, 4>{0xef, 0xcd, 0xab, 0x5a}));
  EXPECT_EQ(dev.bad_accesses(), 0u);
}

TEST(PcTestdevIomemTest, UnalignedAccessesWork) {
  PcTestdevIomem dev;
  const std::array<std::uint8_t, 4> v{1, 2, 3, 4};
  dev.write(0x7, v);
  EXPECT_EQ((read_at<4>(dev, 0x7)), v);
  EXPECT_EQ((read_at<2>(dev, 0x8)), (std::array<std::uint8_t, 2>{2, 3}));
}

TEST(PcTestdevIomemTest, BytesPastTheEndReadAllOnesAndAreNotStored) {
  PcTestdevIomem dev;
  const std::array<std::uint8_t, 4> v{0xaa, 0xbb, 0xcc, 0xdd};
  dev.write(PcTestdevIomem::kSize - 2, v);  // straddles the end
  EXPECT_EQ((read_at<4>(dev, PcTestdevIomem::kSize - 2)),
            (std::array<std::uint8_t, 4>{0xaa, 0xbb, 0xff, 0xff}));
  EXPECT_EQ((read_at<8>(dev, ~std::uint64_t{0} - 3)), (std::array<std::uint8_t, 8>{
                                                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                                         0xff, 0xff}));  // wraps: all outside
  EXPECT_EQ((read_at<2>(dev, 0)), (std::array<std::uint8_t, 2>{0, 0})) << "nothing wrapped in";
  EXPECT_EQ(dev.bad_accesses(), 3u);
}

}  // namespace
}  // namespace minivmm::devices
