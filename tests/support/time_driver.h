// Advances a fake clock deadline by deadline, running the due timers of `lists` at each one
// (QEMU qemu_clock_advance_virtual_time, Chromium FastForwardBy). Jumping once and running once
// would fire a 1 ms periodic timer once instead of N times.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "tests/support/fake_clock.h"
#include "timers/timer_list.h"

namespace minivmm::testing {

// Runs every timer due up to now + `by`, in order, leaving the clock at now + `by`. All lists
// must run on `clock` (or a VmClock derived from it). Returns the number of timers run.
inline std::size_t advance(FakeClock& clock, std::initializer_list<timers::TimerList*> lists,
                           Nanos by) {
  const Nanos end = clock.now() + by;
  std::size_t ran = 0;
  for (;;) {
    std::optional<Nanos> next;
    for (timers::TimerList* l : lists) {
      const auto d = l->next_deadline();
      if (!d) continue;
      const auto mono = l->clock().to_monotonic(*d);
      if (mono && (!next || *mono < *next)) next = mono;
    }
    if (!next || *next > end) break;
    clock.set(std::max(*next, clock.now()));
    for (timers::TimerList* l : lists) ran += l->run_expired(l->clock().from_monotonic(clock.now()));
  }
  clock.set(end);
  return ran;
}

inline std::size_t advance(FakeClock& clock, timers::TimerList& list, Nanos by) {
  return advance(clock, {&list}, by);
}

}  // namespace minivmm::testing
