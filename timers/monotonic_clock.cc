#include "timers/monotonic_clock.h"

#include <time.h>

#include "timers/clock_read_counter.h"

namespace minivmm::timers {

Nanos MonotonicClock::now() const noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  clock_read_counter().fetch_add(1, std::memory_order_relaxed);
  return Nanos{static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec};
}

}  // namespace minivmm::timers
