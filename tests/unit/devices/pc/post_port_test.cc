// Port 0x80: codes are remembered and counted, reads float high.
#include "devices/pc/post_port.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::PostPort;

TEST(PostPortTest, WritesAreRememberedAndCounted) {
  PostPort port;
  for (std::uint8_t code : {std::uint8_t{0x11}, std::uint8_t{0x22}, std::uint8_t{0x33}}) {
    port.write(0, std::span(&code, 1));
  }
  EXPECT_EQ(port.last_code(), 0x33);
  EXPECT_EQ(port.writes(), 3u);
}

TEST(PostPortTest, ReadsReturnAllOnesNotTheLastCode) {
  PostPort port;
  const std::uint8_t code = 0x42;
  port.write(0, std::span(&code, 1));
  for (std::size_t width : {1u, 2u, 4u}) {
    std::vector<std::uint8_t> data(width, 0);
    port.read(0, data);
    EXPECT_EQ(data, std::vector<std::uint8_t>(width, 0xff));
  }
}

TEST(PostPortTest, WideWriteKeepsTheFirstByte) {
  PostPort port;
  const std::vector<std::uint8_t> data = {0xab, 0xcd, 0xef, 0x01};  // `out 0x80, eax`
  port.write(0, data);
  EXPECT_EQ(port.last_code(), 0xab);
  EXPECT_EQ(port.writes(), 1u);
}

TEST(PostPortTest, RandomRegisterSweepNeverCrashes) {
  PostPort port;
  std::mt19937 rng(0x80);
  const std::size_t widths[] = {1, 2, 4};
  std::uint64_t writes = 0;
  std::uint8_t last = 0;
  for (int i = 0; i < 5000; ++i) {
    std::vector<std::uint8_t> data(widths[rng() % 3]);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    if (rng() % 2 == 0) {
      port.read(0, data);
      ASSERT_EQ(data, std::vector<std::uint8_t>(data.size(), 0xff));
    } else {
      port.write(0, data);
      ++writes;
      last = data[0];
    }
  }
  EXPECT_EQ(port.writes(), writes);
  EXPECT_EQ(port.last_code(), last);
}

// The run report's "post_port" object: writes only, as --stats always had.
TEST(PostPortTest, ReportsWritesUnderPostPort) {
  PostPort port;
  const std::uint8_t code = 0x11;
  port.write(0, std::span(&code, 1));
  minivmm::testing::MapReportWriter report;
  port.report(report);
  EXPECT_EQ(port.report_key(), "post_port");
  EXPECT_EQ(report.typed_paths(), (std::set<std::string>{"writes number"}));
  EXPECT_EQ(report.counter("writes"), 1u);
}

}  // namespace
