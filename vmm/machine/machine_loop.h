// The loop and its clocks, built first: every device, the control socket and --duration hang
// on them. rt_clock is the host's monotonic clock; vm_clock is rt_clock minus the time the VM
// was paused (it stands still while paused); the wall clock is what the RTC reads.
//
// Timer lists by what they serve: `loop_vm_timers` are the loop thread's vm_clock timers (the RTC,
// the UART's character timing, the PIT's under --pit-tick loop and the host pulse train's
// refills), `loop_rt_timers` its rt_clock timers (the UART's flush, --duration, the control
// socket's idle sweep). Dynticks runs both and touches the host alarm once per pass.
//
// Threads: built and destroyed on the main thread; everything else is the loop thread's, but
// for the lists' thread-safe arm() (timers/timer_list.h).
#pragma once

#include <memory>

#include "loop/event_loop.h"
#include "timers/alarm_timer.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/timer_list.h"
#include "timers/vm_clock.h"
#include "timers/wall_clock.h"
#include "vmm/machine/config.h"

namespace minivmm::vmm {

struct MachineLoop {
  // The alarm and poller the configuration names. Throws VmmError: kUsage for a bad
  // --periodic-hz, kHostFailure when the host refuses a timer or a poller.
  explicit MachineLoop(const Config& config);
  MachineLoop(const MachineLoop&) = delete;
  MachineLoop& operator=(const MachineLoop&) = delete;

  timers::MonotonicClock mono;
  timers::VmClock vm_clock{mono};
  timers::WallClock wall;
  timers::TimerList loop_vm_timers{timers::ClockType::kVm, vm_clock};
  timers::TimerList loop_rt_timers{timers::ClockType::kRt, mono};
  std::unique_ptr<timers::AlarmTimer> alarm;
  std::unique_ptr<timers::Dynticks> dynticks;
  std::unique_ptr<loop::EventLoop> loop;
};

}  // namespace minivmm::vmm
