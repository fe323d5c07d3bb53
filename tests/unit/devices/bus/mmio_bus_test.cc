// MmioBus: dispatch by address with offsets, the undecoded-bus behaviour and its counters.
#include "devices/bus/mmio_bus.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::MmioBus;
using minivmm::devices::MmioDevice;

struct RecordingDevice final : MmioDevice {
  std::string_view name() const noexcept override { return "rec"; }
  void read(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override {
    reads.push_back(offset);
    for (auto& b : data) b = 0x5a;
  }
  void write(std::uint64_t offset, std::span<const std::uint8_t> data) noexcept override {
    writes.push_back(offset);
    sizes.push_back(data.size());
  }
  std::vector<std::uint64_t> reads, writes;
  std::vector<std::size_t> sizes;
};

TEST(MmioBusTest, AccessesReachTheDeviceAsOffsets) {
  MmioBus bus;
  RecordingDevice dev;
  bus.attach(0xd0000000, 0x1000, dev);
  std::uint64_t v = 0;
  auto bytes = std::span(reinterpret_cast<std::uint8_t*>(&v), 8);
  EXPECT_TRUE(bus.read(0xd0000ff8, bytes));
  EXPECT_EQ(v, 0x5a5a5a5a5a5a5a5aull);
  EXPECT_TRUE(bus.write(0xd0000050, bytes.first(4)));
  EXPECT_EQ(dev.reads, std::vector<std::uint64_t>{0xff8});
  EXPECT_EQ(dev.writes, std::vector<std::uint64_t>{0x50});
  EXPECT_EQ(dev.sizes, std::vector<std::size_t>{4});
}

TEST(MmioBusTest, UnmappedReadsAreAllOnesAndCounted) {
  MmioBus bus;
  RecordingDevice dev;
  bus.attach(0xd0000000, 0x1000, dev);
  std::uint32_t v = 0;
  EXPECT_FALSE(bus.read(0xd0001000, std::span(reinterpret_cast<std::uint8_t*>(&v), 4)));
  EXPECT_EQ(v, 0xffffffffu);
  EXPECT_FALSE(bus.write(0xcfffffff, std::span(reinterpret_cast<std::uint8_t*>(&v), 1)));
  EXPECT_EQ(bus.stats().unmapped_reads, 1u);
  EXPECT_EQ(bus.stats().unmapped_writes, 1u);
  EXPECT_TRUE(dev.reads.empty());
  EXPECT_TRUE(dev.writes.empty());
}

TEST(MmioBusTest, AnAccessStraddlingTheEndGoesNowhere) {
  MmioBus bus;
  RecordingDevice dev;
  bus.attach(0x1000, 0x1000, dev);
  std::uint64_t v = 0;
  EXPECT_FALSE(bus.read(0x1ffc, std::span(reinterpret_cast<std::uint8_t*>(&v), 8)));
  EXPECT_EQ(v, ~0ull);
  EXPECT_TRUE(dev.reads.empty());
}

TEST(MmioBusTest, OddWidthsAreRefusedAndCounted) {
  MmioBus bus;
  RecordingDevice dev;
  bus.attach(0x1000, 0x1000, dev);
  std::uint8_t buf[16] = {};
  EXPECT_FALSE(bus.read(0x1000, std::span(buf, 3)));
  EXPECT_FALSE(bus.write(0x1000, std::span(buf, 16)));
  EXPECT_FALSE(bus.write(0x1000, std::span(buf, 0)));
  EXPECT_EQ(bus.stats().bad_width, 3u);
  EXPECT_TRUE(dev.writes.empty());
}

TEST(MmioBusTest, OverlapsZeroLengthsAndWrapsAreSetupErrors) {
  MmioBus bus;
  RecordingDevice a, b;
  bus.attach(0x1000, 0x1000, a);
  EXPECT_THROW(bus.attach(0x1fff, 0x10, b), std::invalid_argument);
  EXPECT_THROW(bus.attach(0x3000, 0, b), std::invalid_argument);
  EXPECT_THROW(bus.attach(UINT64_MAX - 4, 0x10, b), std::invalid_argument);
  bus.attach(UINT64_MAX - 0xfff, 0x1000, b);  // up to the last byte is fine
  std::uint8_t x = 0;
  EXPECT_TRUE(bus.read(UINT64_MAX, std::span(&x, 1)));
  EXPECT_EQ(b.reads, std::vector<std::uint64_t>{0xfff});
}

// The run report's "unmapped_mmio" object: the keys and types --stats always had.
TEST(MmioBusTest, ReportsUnmappedAccessesUnderUnmappedMmio) {
  MmioBus bus;
  std::uint8_t b[16] = {};
  bus.read(0x1000, std::span(b, 4));
  bus.write(0x1000, std::span(b, 16));  // too wide
  minivmm::testing::MapReportWriter report;
  bus.report(report);
  EXPECT_EQ(bus.report_key(), "unmapped_mmio");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"bad_width number", "reads number", "writes number"}));
  EXPECT_EQ(report.counter("reads"), 1u);
  EXPECT_EQ(report.counter("bad_width"), 1u);
}

}  // namespace
