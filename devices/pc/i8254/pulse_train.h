// A train of IRQ pulses raised by something other than the device's own timer: the device says
// "an edge at `first` and every `period` after it, until further notice", and the wire delivers
// each edge itself. For a periodic timer device (the PIT in modes 2 and 3) this lets the VMM
// hand the whole schedule to the host kernel, so that no thread of the VMM wakes per tick.
//
// Threads: start()/stop() from the device's thread under the device's lock; delivered() and
// report() from any thread. Implementations take no lock of the device's, except to call the turn hook, which
// they do with none of their own held (so the hook may take the device's lock and call back).
#pragma once

#include <cstdint>
#include <functional>

#include "devices/bus/report_writer.h"
#include "timers/clock.h"

namespace minivmm::devices {

class PulseTrain {
 public:
  // Called each time the train's own thread wakes to keep it going (HostKernelPulseTrain's refill,
  // every few dozen periods), with the time of that wakeup. A device that must look at its line
  // now and then (the PIT's acknowledgement audit) rides on it instead of a timer of its own:
  // one wakeup, not two.
  using TurnHook = std::function<void(timers::Nanos now)>;

  virtual ~PulseTrain() = default;

  // Edges at first, first + period, ... (times on the device's clock, period > 0), replacing
  // any train still running. Returns false if the train cannot run (the caller falls back to
  // its own timer); edges already delivered stay delivered.
  virtual bool start(timers::Nanos first, timers::Nanos period) noexcept = 0;
  // No edge after this returns (one already on its way may still land).
  virtual void stop() noexcept = 0;
  // Like stop(), but from a tick path that must not block: no edge after this returns, and any
  // teardown that may wait on the host is left to the next start() or stop(). HostKernelPulseTrain
  // disarms its timers but keeps its irqfd bound: unbinding waits for KVM's injection worker,
  // which is exactly what is being held off when the device gives up on the train.
  virtual void hold() noexcept { stop(); }
  // Edges delivered so far by every train this object ran.
  virtual std::uint64_t delivered() noexcept = 0;
  // Edges of the schedule that the train knows never reached the line (HostKernelPulseTrain:
  // a timer fired again before its poll was re-armed, because the loop thread or the kernel's
  // poll-completion worker ran late), so far. The device owes them, as it owes merged ones.
  virtual std::uint64_t missed() noexcept { return 0; }
  // Set once, before the first start(); the hook must stay callable as long as the train runs.
  virtual void set_turn_hook(TurnHook hook) noexcept = 0;
  // The train's own counters, for the run report: its device nests them under its own
  // (I8254Pit: devices.pit.kernel_train).
  virtual void report(ReportWriter& out) const = 0;
};

}  // namespace minivmm::devices
