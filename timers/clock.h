// Clocks are injected everywhere time matters, so devices and timer lists can be driven by a
// fake clock in tests (crosvm FakeClock, Chromium TickClock). Time is a plain nanosecond count
// whose epoch depends on the clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace minivmm::timers {

using Nanos = std::chrono::nanoseconds;

inline constexpr Nanos kNanosPerSecond{1'000'000'000};

class Clock {
 public:
  virtual ~Clock() = default;

  // Current time of this clock. Thread-safe; called from the loop and vCPU threads.
  virtual Nanos now() const noexcept = 0;

  // The CLOCK_MONOTONIC instant at which this clock will read `t`, given the mapping in force
  // now; nullopt when this clock is stopped (a paused vm_clock), so its timers drop out of the
  // host alarm computation (QEMU's timerlist_deadline_ns returning -1 for a disabled clock).
  virtual std::optional<Nanos> to_monotonic(Nanos t) const noexcept = 0;

  // This clock's reading at the CLOCK_MONOTONIC instant `mono`, without reading the host clock
  // again: the loop reads the host clock once per iteration and derives every clock from it.
  virtual Nanos from_monotonic(Nanos mono) const noexcept = 0;
};

}  // namespace minivmm::timers
