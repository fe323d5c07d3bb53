// The RTC's grid and calendar arithmetic (mc146818_rtc_time.h).
#include "devices/pc/mc146818_rtc_time.h"

#include <chrono>

namespace minivmm::devices::mc146818 {

using timers::Nanos;

std::int64_t grid_index(Nanos t, std::uint32_t cycles) noexcept {
  const std::int64_t s = floor_div(t.count(), kNsPerSecond);
  const std::int64_t ns = t.count() - s * kNsPerSecond;
  return s * ticks_per_second(cycles) + ns * kBaseHz / (std::int64_t{cycles} * kNsPerSecond);
}

Nanos grid_point(std::int64_t k, std::uint32_t cycles) noexcept {
  const std::int64_t tps = ticks_per_second(cycles);
  const std::int64_t s = floor_div(k, tps);
  const std::int64_t j = k - s * tps;
  const std::int64_t ns = (j * std::int64_t{cycles} * kNsPerSecond + kBaseHz - 1) / kBaseHz;
  return Nanos{s * kNsPerSecond + ns};
}

Civil civil_from(Nanos rtc) noexcept {
  namespace chr = std::chrono;
  const std::int64_t secs = floor_div(rtc.count(), kNsPerSecond);
  const std::int64_t days = floor_div(secs, kSecondsPerDay);
  const std::int64_t sod = secs - days * kSecondsPerDay;
  const chr::sys_days date{chr::days{days}};
  const chr::year_month_day ymd{date};
  const chr::weekday wd{date};
  return Civil{static_cast<int>(ymd.year()),
               static_cast<int>(static_cast<unsigned>(ymd.month())),
               static_cast<int>(static_cast<unsigned>(ymd.day())),
               static_cast<int>(sod / 3600),
               static_cast<int>(sod / 60 % 60),
               static_cast<int>(sod % 60),
               static_cast<int>(wd.c_encoding()) + 1};
}

std::int64_t epoch_seconds(const Civil& c) noexcept {
  namespace chr = std::chrono;
  const chr::year_month_day ymd{chr::year{c.year}, chr::month{static_cast<unsigned>(c.month)},
                                chr::day{static_cast<unsigned>(c.day)}};
  const chr::sys_days date{ymd};
  return std::int64_t{date.time_since_epoch().count()} * kSecondsPerDay + c.hour * 3600 +
         c.minute * 60 + c.second;
}

}  // namespace minivmm::devices::mc146818
