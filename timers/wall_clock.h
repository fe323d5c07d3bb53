// host_clock: CLOCK_REALTIME, the wall time an RTC shows. No timers run on it (its steps would
// make deadlines jump); devices read it and schedule on vm_clock.
#pragma once

#include "timers/clock.h"

namespace minivmm::timers {

class WallClock final : public Clock {
 public:
  Nanos now() const noexcept override;
  // Wall time is not a fixed offset from CLOCK_MONOTONIC (NTP steps it), so the mapping is only
  // valid for "now"; each call reads both clocks.
  std::optional<Nanos> to_monotonic(Nanos t) const noexcept override;
  Nanos from_monotonic(Nanos mono) const noexcept override;
};

}  // namespace minivmm::timers
