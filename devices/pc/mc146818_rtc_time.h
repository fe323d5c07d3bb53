// The MC146818A's time arithmetic, pure and stateless: the 32.768 kHz grid its periodic
// interrupts and once-a-second updates fall on, and the civil calendar its time registers
// show. Mc146818Rtc's register file reads the calendar; its interrupt half (flags and the
// timer) walks the grid. Internal to the device.
#pragma once

#include <cstdint>

#include "timers/clock.h"

namespace minivmm::devices::mc146818 {

inline constexpr std::int64_t kNsPerSecond = 1'000'000'000;
inline constexpr std::int64_t kSecondsPerDay = 86'400;
inline constexpr std::int64_t kBaseHz = 32'768;
inline constexpr std::uint32_t kCyclesPerSecond = 32'768;

// Division and remainder that round towards minus infinity (RTC time may be before 1970 for a
// moment: a guest can set any date, and the host clock may step back).
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

inline std::int64_t floor_mod(std::int64_t a, std::int64_t b) noexcept {
  return a - floor_div(a, b) * b;
}

// The periodic grid: points `cycles` 32.768 kHz cycles apart, aligned to each second (the
// periodic taps and the once-a-second update come from one divider chain). Point j of second s
// is at s + ceil(j * cycles / 32768 s), exact in ns however the period rounds.
inline std::int64_t ticks_per_second(std::uint32_t cycles) noexcept { return kBaseHz / cycles; }

// The number of grid points at or before `t`, counted from the epoch.
std::int64_t grid_index(timers::Nanos t, std::uint32_t cycles) noexcept;
// Grid point `k` (the inverse of grid_index for the points themselves).
timers::Nanos grid_point(std::int64_t k, std::uint32_t cycles) noexcept;

// A moment of RTC time as the time registers show it.
struct Civil {
  int year;
  int month;  // 1-12
  int day;    // 1-31
  int hour;   // 0-23
  int minute;
  int second;
  int weekday;  // 1 = Sunday ... 7 = Saturday, as the RTC counts
};

// RTC time (ns since 1970) as a calendar date and time of day, the weekday computed.
Civil civil_from(timers::Nanos rtc) noexcept;
// Seconds since 1970 of a date and time of day (the weekday is ignored); `c` must be a valid
// date.
std::int64_t epoch_seconds(const Civil& c) noexcept;

}  // namespace minivmm::devices::mc146818
