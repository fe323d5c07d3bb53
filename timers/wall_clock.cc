#include "timers/wall_clock.h"

#include <time.h>

#include "timers/clock_read_counter.h"

namespace minivmm::timers {
namespace {

Nanos read(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  clock_read_counter().fetch_add(1, std::memory_order_relaxed);
  return Nanos{static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec};
}

}  // namespace

Nanos WallClock::now() const noexcept { return read(CLOCK_REALTIME); }

std::optional<Nanos> WallClock::to_monotonic(Nanos t) const noexcept {
  return t - (read(CLOCK_REALTIME) - read(CLOCK_MONOTONIC));
}

Nanos WallClock::from_monotonic(Nanos mono) const noexcept {
  return mono + (read(CLOCK_REALTIME) - read(CLOCK_MONOTONIC));
}

}  // namespace minivmm::timers
