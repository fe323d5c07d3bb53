// A device with something of its own that runs on host time or in the host kernel, which a pause
// of the machine must hold and a resume bring back (issue 34: pause is a device operation the
// machine iterates, not machine code that knows which device needs what). The PIT is one: its
// ticks may be host-kernel timers (withdrawn, then re-armed on the vm_clock grid), or KVM's own
// PIT, which counts host time (read, then set back, so the paused time is not replayed).
// A device whose state is all on vm_clock needs nothing: vm_clock itself stops.
//
// Threads: the loop thread, with every vCPU parked. pause() runs before vm_clock stops (an edge
// the host fired after the stop would be re-armed on resume); resume() after it runs again and
// before any vCPU does. pause() takes what stands now, so a machine that loads a snapshot while
// paused pauses its devices again after the load: the loaded state is what resume brings back.
#pragma once

namespace minivmm::devices {

class PausableDevice {
 public:
  virtual ~PausableDevice() = default;
  // May throw (a host call that failed); the pause is then not taken and the run ends.
  virtual void pause() = 0;
  virtual void resume() = 0;
};

}  // namespace minivmm::devices
