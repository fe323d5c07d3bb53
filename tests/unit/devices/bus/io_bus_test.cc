// IoBus: dispatch by port with offsets, and what it counts and reports of unmapped ports.
#include "devices/bus/io_bus.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::IoBus;
using minivmm::devices::PortIoDevice;

struct RecordingPort final : PortIoDevice {
  std::string_view name() const noexcept override { return "rec"; }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override {
    reads.push_back(offset);
    for (auto& b : data) b = 0x5a;
  }
  void write(std::uint16_t offset, std::span<const std::uint8_t>) noexcept override {
    writes.push_back(offset);
  }
  std::vector<std::uint16_t> reads, writes;
};

TEST(IoBusTest, DevicesSeeOffsetsAndUnmappedPortsReadAllOnes) {
  IoBus bus;
  RecordingPort dev;
  bus.attach(0x3f8, 8, dev);
  std::uint8_t b = 0;
  EXPECT_TRUE(bus.read(0x3fd, std::span(&b, 1)));
  EXPECT_EQ(b, 0x5a);
  EXPECT_TRUE(bus.write(0x3f8, std::span(&b, 1)));
  EXPECT_FALSE(bus.read(0x3f7, std::span(&b, 1)));
  EXPECT_EQ(b, 0xff);
  EXPECT_EQ(dev.reads, std::vector<std::uint16_t>{5});
  EXPECT_EQ(dev.writes, std::vector<std::uint16_t>{0});
}

// The run report's "unmapped_ports" object: one {reads, writes} per port, named as fmt's
// "{:#06x}" names it (port 0 included, which printf's "%#06x" would print as "000000").
TEST(IoBusTest, ReportsEachUnmappedPortUnderItsHexName) {
  IoBus bus;
  std::uint8_t b = 0;
  bus.read(0x61, std::span(&b, 1));
  bus.write(0x61, std::span(&b, 1));
  bus.write(0x61, std::span(&b, 1));
  bus.read(0, std::span(&b, 1));
  bus.write(0xcf8, std::span(&b, 1));
  minivmm::testing::MapReportWriter report;
  bus.report(report);
  EXPECT_EQ(bus.report_key(), "unmapped_ports");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"0x0000 object", "0x0000/reads number",
                                   "0x0000/writes number", "0x0061 object",
                                   "0x0061/reads number", "0x0061/writes number",
                                   "0x0cf8 object", "0x0cf8/reads number",
                                   "0x0cf8/writes number"}));
  EXPECT_EQ(report.counter("0x0061/reads"), 1u);
  EXPECT_EQ(report.counter("0x0061/writes"), 2u);
  EXPECT_EQ(report.counter("0x0cf8/writes"), 1u);
}

TEST(IoBusTest, ReportsNothingWhenEveryAccessWasMapped) {
  IoBus bus;
  minivmm::testing::MapReportWriter report;
  bus.report(report);
  EXPECT_TRUE(report.typed_paths().empty());
}

}  // namespace
