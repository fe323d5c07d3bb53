// Nanos to the kernel's timespec, for the timer syscalls (timer_settime, timerfd_settime).
#pragma once

#include <time.h>

#include "timers/clock.h"

namespace minivmm::timers {

inline timespec to_timespec(Nanos n) noexcept {
  return timespec{static_cast<time_t>(n.count() / kNanosPerSecond.count()),
                  static_cast<long>(n.count() % kNanosPerSecond.count())};
}

}  // namespace minivmm::timers
