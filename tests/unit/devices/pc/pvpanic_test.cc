// The ISA pvpanic device (devices/pc/pvpanic.h): what a guest reads, which writes end the run,
// and what is counted and ignored.
#include "devices/pc/pvpanic.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "tests/support/map_report_writer.h"

namespace minivmm::devices {
namespace {

struct PvPanicRig {
  int panics_seen = 0;
  PvPanic dev{[this] { ++panics_seen; }};

  std::uint8_t read(std::uint16_t offset = 0) {
    std::array<std::uint8_t, 1> b{};
    dev.read(offset, b);
    return b[0];
  }
  void write(std::uint8_t v, std::uint16_t offset = 0) {
    dev.write(offset, std::array<std::uint8_t, 1>{v});
  }
};

TEST(PvPanicTest, ReadingGivesTheEventsQemuOffers) {
  PvPanicRig r;
  EXPECT_EQ(r.read(), 0x03);  // panicked | crash loaded
}

TEST(PvPanicTest, APanicEndsTheRunOnce) {
  PvPanicRig r;
  r.write(PvPanic::kPanicked);
  EXPECT_EQ(r.panics_seen, 1);
  EXPECT_EQ(r.dev.panics(), 1u);
}

TEST(PvPanicTest, ACrashKernelLoadedIsCountedAndTheGuestGoesOn) {
  PvPanicRig r;
  r.write(PvPanic::kCrashLoaded);
  EXPECT_EQ(r.panics_seen, 0);
  testing::MapReportWriter w;
  r.dev.report(w);
  EXPECT_EQ(w.counter("crash_loaded"), 1u);
  EXPECT_EQ(w.counter("panics"), 0u);
}

TEST(PvPanicTest, UnknownBitsAreCountedAndIgnoredButAPanicBitStillCounts) {
  PvPanicRig r;
  r.write(0x80);
  EXPECT_EQ(r.panics_seen, 0);
  r.write(0x81);  // an unknown bit beside "panicked": QEMU still acts on the panic
  EXPECT_EQ(r.panics_seen, 1);
  testing::MapReportWriter w;
  r.dev.report(w);
  EXPECT_EQ(w.counter("unknown_events"), 2u);
}

TEST(PvPanicTest, OffsetsPastThePortAndEmptyAccessesAreBadAndHarmless) {
  PvPanicRig r;
  EXPECT_EQ(r.read(1), 0xff);
  r.write(PvPanic::kPanicked, 3);
  r.dev.write(0, std::span<const std::uint8_t>{});
  EXPECT_EQ(r.panics_seen, 0);
  // A 16-bit read gives the events in its first byte and 0xff beyond (the next port).
  std::array<std::uint8_t, 2> wide{};
  r.dev.read(0, wide);
  EXPECT_EQ(wide[0], 0x03);
  EXPECT_EQ(wide[1], 0xff);
  testing::MapReportWriter w;
  r.dev.report(w);
  EXPECT_EQ(w.counter("bad_accesses"), 3u);
}

}  // namespace
}  // namespace minivmm::devices
