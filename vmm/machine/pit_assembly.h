// The user-space i8254 PIT (--pit user) with the tick delivery --pit-tick asks for, or KVM's
// own PIT (--pit kvm, the baseline), and nothing of ours then. Who delivers the periodic ticks:
//  - loop: the PIT's timers are the loop thread's vm_clock timers; the loop raises IRQ0.
//  - vcpu: a timer list of the PIT's own, run by vCPU 0 between KVM_RUNs (ThreadTimers, a
//    POSIX timer whose signal interrupts KVM_RUN); the vCPU raises IRQ0.
//  - kernel: periodic programs become a pulse train of host-kernel timers that signal an
//    irqfd (HostKernelPulseTrain): no thread of ours wakes per tick.
// IRQ0 counts the guest's acknowledgements (a resample eventfd) so the PIT finds ticks that
// merged while a busy host did not run the vCPU (devices/pc/i8254/i8254_pit.h).
//
// Threads: built on the main thread; pause()/resume() on the loop thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <linux/kvm.h>

#include "devices/bus/pausable_device.h"
#include "devices/bus/report_writer.h"
#include "devices/pc/i8254/i8254_pit.h"
#include "devices/pc/i8254/i8254_speaker_port.h"
#include "timers/thread_timers.h"
#include "timers/timer_list.h"
#include "vmm/kvm/host_kernel_pulse_train.h"
#include "vmm/kvm/kvm_irq_line.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/config.h"
#include "vmm/machine/machine_loop.h"

namespace minivmm::vmm {

class PitAssembly final : public devices::ReportingDevice, public devices::PausableDevice {
 public:
  struct Wiring {
    const Config& config;
    Vm& vm;
    MachineLoop& loop;
    std::uint32_t gsi;  // IRQ0's line
    // A PC BIOS leaves channel 0 running at 18.2 Hz (a multiboot kernel that may rely on it).
    bool bios_timer;
    // The pulse train could not refill or resume: the run ends (loop thread).
    std::function<void(const std::string& why)> on_failure;
  };

  // Throws VmmError (KVM refusing the PIT, IRQ0's irqfd or the vCPU timer).
  explicit PitAssembly(const Wiring& w);
  ~PitAssembly();
  PitAssembly(const PitAssembly&) = delete;
  PitAssembly& operator=(const PitAssembly&) = delete;

  // nullptr with --pit kvm.
  devices::I8254Pit* pit() const noexcept { return pit_.get(); }
  devices::I8254SpeakerPort* speaker() const noexcept { return speaker_.get(); }
  KvmIrqLine* irq0() const noexcept { return irq0_.get(); }
  HostKernelPulseTrain* train() const noexcept { return train_.get(); }
  // --pit-tick vcpu: what runs the PIT's timer list on vCPU 0 (a Dynticks of that thread's).
  timers::ThreadTimers* vcpu_dynticks() const noexcept { return vcpu_dynticks_.get(); }

  // Pause withdraws the host kernel's armed edges before vm_clock stops (an edge fired after
  // the stop would be re-armed on resume); resume re-arms them from the vm_clock grid. KVM's PIT
  // runs on host time: pause reads it and resume sets it back, which restarts its counters'
  // phase then, so the paused time is not replayed as reinjected ticks. Throws VmmError (KVM
  // refusing the read or the set).
  void pause() override;
  void resume() override;

  // The PIT's report (its pulse train's under "kernel_train"); nothing with KVM's PIT.
  std::string_view report_key() const noexcept override { return "pit"; }
  void report(devices::ReportWriter& out) const override;

 private:
  void build_user_pit(const Wiring& w);

  std::unique_ptr<KvmIrqLine> irq0_;
  // --pit-tick vcpu: the PIT's vm_clock timers, run by vCPU 0 (not the loop).
  std::unique_ptr<timers::TimerList> vcpu_pit_timers_;
  std::unique_ptr<timers::ThreadTimers> vcpu_dynticks_;
  std::unique_ptr<HostKernelPulseTrain> train_;  // --pit-tick kernel; outlives pit_
  std::unique_ptr<devices::I8254Pit> pit_;
  std::unique_ptr<devices::I8254SpeakerPort> speaker_;
  // --pit kvm: the VM whose PIT it is, and its state while paused.
  int kernel_pit_vm_fd_ = -1;
  std::optional<kvm_pit_state2> held_kernel_pit_;
};

}  // namespace minivmm::vmm
