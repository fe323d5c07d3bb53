// GuestMemory: every range check is overflow-safe and failures are reported, not thrown.
#include "devices/bus/guest_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using minivmm::devices::GuestMemory;

TEST(GuestRamTest, ContainsIsExactAtTheEnd) {
  std::vector<std::byte> bytes(4096);
  GuestMemory ram{std::span(bytes)};
  EXPECT_TRUE(ram.contains(0, 4096));
  EXPECT_TRUE(ram.contains(4096, 0));
  EXPECT_FALSE(ram.contains(4096, 1));
  EXPECT_FALSE(ram.contains(4095, 2));
  EXPECT_FALSE(ram.contains(4097, 0));
}

TEST(GuestRamTest, RangesThatWouldWrapAreOutside) {
  std::vector<std::byte> bytes(4096);
  GuestMemory ram{std::span(bytes)};
  EXPECT_FALSE(ram.contains(16, UINT64_MAX));
  EXPECT_FALSE(ram.contains(UINT64_MAX, 2));
  EXPECT_TRUE(ram.slice(UINT64_MAX - 1, 4).empty());
}

TEST(GuestRamTest, ReadsAndWritesOutsideFailWithoutTouchingAnything) {
  std::vector<std::byte> bytes(64);
  GuestMemory ram{std::span(bytes)};
  std::uint64_t v = 0x1122334455667788;
  EXPECT_TRUE(ram.write_obj(56, v));
  EXPECT_FALSE(ram.write_obj(57, v));
  std::uint64_t out = 0;
  EXPECT_TRUE(ram.read_obj(56, out));
  EXPECT_EQ(out, v);
  out = 7;
  EXPECT_FALSE(ram.read_obj(60, out));
  EXPECT_EQ(out, 7u);
}

TEST(GuestRamTest, EmptyViewHasNoBytes) {
  GuestMemory ram;
  EXPECT_EQ(ram.size(), 0u);
  EXPECT_TRUE(ram.contains(0, 0));
  EXPECT_FALSE(ram.contains(0, 1));
}

}  // namespace
