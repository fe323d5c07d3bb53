// rt_clock: CLOCK_MONOTONIC. Runs while the VM is paused; used for host-side timers (stats,
// --duration) and as the base every other clock is derived from.
#pragma once

#include "timers/clock.h"

namespace minivmm::timers {

class MonotonicClock final : public Clock {
 public:
  Nanos now() const noexcept override;
  std::optional<Nanos> to_monotonic(Nanos t) const noexcept override { return t; }
  Nanos from_monotonic(Nanos mono) const noexcept override { return mono; }
};

}  // namespace minivmm::timers
