#include "vmm/boot/e820.h"

#include <gtest/gtest.h>

#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm {
namespace {

using testing::kGiB;
using testing::kMiB;
using testing::throws_boot_error;

TEST(E820Test, ReservesTheLegacyHoleBelowOneMiB) {
  const auto map = build_e820_map(128 * kMiB);
  const std::vector<E820Entry> expected = {
      {0, 0x9fc00, E820Type::kRam},
      {0x9fc00, 0x60400, E820Type::kReserved},
      {0x100000, 127 * kMiB, E820Type::kRam},
  };
  EXPECT_EQ(map, expected);
}

TEST(E820Test, AcceptsExactly3GiB) {
  const auto map = build_e820_map(3 * kGiB);
  EXPECT_EQ(map.back().addr + map.back().size, 3 * kGiB);
}

TEST(E820Test, RejectsRamAbove3GiB) {
  EXPECT_TRUE(throws_boot_error([] { build_e820_map(3 * kGiB + 1); }, "0xc0000001"));
}

TEST(E820Test, RejectsRamWithoutHighMemory) {
  EXPECT_TRUE(throws_boot_error([] { build_e820_map(kMiB); }, "too small"));
}

}  // namespace
}  // namespace minivmm::vmm
