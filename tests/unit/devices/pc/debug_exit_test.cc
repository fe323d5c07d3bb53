// isa-debug-exit: the exit status a guest gets for each write, and that nothing else happens.
#include "devices/pc/debug_exit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::DebugExit;

struct ExitRig {
  void write(std::uint16_t offset, std::vector<std::uint8_t> bytes) { device.write(offset, bytes); }
  std::vector<int> statuses;
  DebugExit device{[this](int status) { statuses.push_back(status); }};
};

TEST(DebugExitTest, ByteWritesRequestValueTimesTwoPlusOne) {
  ExitRig rig;
  rig.write(0, {0x00});
  rig.write(0, {0x01});
  rig.write(0, {0x7f});
  rig.write(0, {0xff});
  EXPECT_EQ(rig.statuses, (std::vector<int>{1, 3, 0xff, 0x1ff}));
  EXPECT_EQ(rig.device.exit_requests(), 4u);
}

TEST(DebugExitTest, SixteenBitWriteUsesTheWholeValue) {
  ExitRig rig;
  rig.write(0, {0x34, 0x12});  // little-endian 0x1234
  EXPECT_EQ(rig.statuses, (std::vector<int>{0x2469}));
}

TEST(DebugExitTest, ThirtyTwoBitWriteUsesTheWholeValueTruncatedToInt) {
  ExitRig rig;
  rig.write(0, {0x10, 0x00, 0x00, 0x00});  // the common "success" code of test kernels
  rig.write(0, {0x78, 0x56, 0x34, 0x12});
  rig.write(0, {0xff, 0xff, 0xff, 0xff});  // (0xffffffff << 1) | 1 keeps its low 32 bits
  EXPECT_EQ(rig.statuses, (std::vector<int>{0x21, 0x2468acf1, -1}));
}

TEST(DebugExitTest, AnyOffsetInTheRangeExits) {
  ExitRig rig;
  rig.write(1, {0x02});
  rig.write(3, {0x03});
  EXPECT_EQ(rig.statuses, (std::vector<int>{5, 7}));
}

TEST(DebugExitTest, ReadsReturnZeroAndDoNotExit) {
  ExitRig rig;
  for (std::size_t width : {1u, 2u, 4u}) {
    std::vector<std::uint8_t> data(width, 0xaa);
    rig.device.read(0, data);
    EXPECT_EQ(data, std::vector<std::uint8_t>(width, 0));
  }
  EXPECT_TRUE(rig.statuses.empty());
}

TEST(DebugExitTest, UnsupportedWidthIsIgnoredAndCounted) {
  ExitRig rig;
  rig.write(0, std::vector<std::uint8_t>(8, 1));
  rig.write(0, {});
  EXPECT_TRUE(rig.statuses.empty());
  EXPECT_EQ(rig.device.bad_accesses(), 2u);
}

TEST(DebugExitTest, EmptyCallbackIsAllowed) {
  DebugExit device{nullptr};
  const std::uint8_t value = 1;
  device.write(0, std::span(&value, 1));
  EXPECT_EQ(device.exit_requests(), 1u);
}

TEST(DebugExitTest, RandomRegisterSweepNeverCrashes) {
  ExitRig rig;
  std::mt19937 rng(0xf4);
  const std::size_t widths[] = {1, 2, 4};
  std::size_t writes = 0;
  for (int i = 0; i < 5000; ++i) {
    const auto offset = static_cast<std::uint16_t>(rng() % DebugExit::kPortCount);
    std::vector<std::uint8_t> data(widths[rng() % 3]);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    if (rng() % 2 == 0) {
      rig.device.read(offset, data);
      ASSERT_EQ(data, std::vector<std::uint8_t>(data.size(), 0));
    } else {
      rig.device.write(offset, data);
      ++writes;
      ASSERT_EQ(rig.statuses.back() & 1, 1);  // a guest can never request status 0
    }
  }
  EXPECT_EQ(rig.statuses.size(), writes);
}

// The run report's "debug_exit" object: exit_requests only, as --stats always had.
TEST(DebugExitTest, ReportsExitRequestsUnderDebugExit) {
  ExitRig rig;
  rig.write(0, {0x01});
  minivmm::testing::MapReportWriter report;
  rig.device.report(report);
  EXPECT_EQ(rig.device.report_key(), "debug_exit");
  EXPECT_EQ(report.typed_paths(), (std::set<std::string>{"exit_requests number"}));
  EXPECT_EQ(report.counter("exit_requests"), 1u);
}

}  // namespace
