// The RTC's time arithmetic on its own: the calendar the time registers show and the 32.768 kHz
// grid its interrupts fall on, including the rates whose period is not a whole number of ns.
#include "devices/pc/mc146818_rtc_time.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace minivmm::devices::mc146818 {
namespace {

using timers::Nanos;

TEST(Mc146818RtcTimeTest, FloorDivisionRoundsTowardsMinusInfinity) {
  EXPECT_EQ(floor_div(7, 2), 3);
  EXPECT_EQ(floor_div(-7, 2), -4);
  EXPECT_EQ(floor_mod(-7, 2), 1);
  EXPECT_EQ(floor_mod(-kNsPerSecond, kNsPerSecond), 0);
}

TEST(Mc146818RtcTimeTest, CalendarRoundTripsAndCountsWeekdaysFromSunday) {
  // 2026-11-29 12:34:56 UTC, a Sunday.
  const Civil c{2026, 11, 29, 12, 34, 56, 0};
  const std::int64_t s = epoch_seconds(c);
  const Civil back = civil_from(Nanos{s * kNsPerSecond + 999'999'999});
  EXPECT_EQ(back.year, 2026);
  EXPECT_EQ(back.month, 11);
  EXPECT_EQ(back.day, 29);
  EXPECT_EQ(back.hour, 12);
  EXPECT_EQ(back.minute, 34);
  EXPECT_EQ(back.second, 56);
  EXPECT_EQ(back.weekday, 1);
  EXPECT_EQ(civil_from(Nanos{0}).weekday, 5);  // 1970-01-01 was a Thursday
  EXPECT_EQ(civil_from(Nanos{-1}).year, 1969);
}

TEST(Mc146818RtcTimeTest, GridPointsAreExactAtEverySecondAndNeverEarly) {
  for (const std::uint32_t cycles : {4u, 32u, 512u, 32768u}) {  // 8192 Hz, 1024 Hz, 64 Hz, 1 Hz
    const std::int64_t tps = ticks_per_second(cycles);
    EXPECT_EQ(grid_point(tps, cycles), Nanos{kNsPerSecond}) << cycles;
    EXPECT_EQ(grid_point(-tps, cycles), Nanos{-kNsPerSecond}) << cycles;
    for (std::int64_t k = -tps - 3; k < 2 * tps + 3; ++k) {
      const Nanos p = grid_point(k, cycles);
      // The exact point is k * cycles / 32768 s: the rounded one is at or after it.
      EXPECT_GE(p.count() * kBaseHz, k * std::int64_t{cycles} * kNsPerSecond) << k;
      EXPECT_EQ(grid_index(p, cycles), k) << cycles << " " << k;
      EXPECT_EQ(grid_index(p - Nanos{1}, cycles), k - 1) << cycles << " " << k;
    }
  }
}

}  // namespace
}  // namespace minivmm::devices::mc146818
