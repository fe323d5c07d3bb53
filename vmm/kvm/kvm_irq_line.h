// An ISA interrupt line wired into KVM's in-kernel irqchip. Pulses go through an irqfd: one
// eventfd write, and KVM raises and lowers the line itself, so a PIT tick costs the loop
// thread one syscall and never kicks a vCPU out to user space. Level changes and checked pulses
// use KVM_IRQ_LINE_STATUS, which also tells whether the edge was coalesced.
//
// With `track_acks` the irqfd is a resampling one (KVM_IRQFD_FLAG_RESAMPLE): KVM keeps the line
// raised until the guest acknowledges the interrupt and then signals a second eventfd. Reading
// that count (acknowledgements(), one read(2)) lets the PIT find the on-time pulses that merged
// because the vCPU had not run since the previous one — a busy host, not the guest, losing a
// tick — without a syscall per tick. Pulses through the ioctl are acknowledged the same way.
#pragma once

#include <cstdint>
#include <optional>

#include "devices/bus/irq_line.h"
#include "vmm/kvm/unique_fd.h"
#include "vmm/kvm/vm.h"

namespace minivmm::vmm {

// How pulse() reaches KVM. irqfd: one eventfd write, but KVM cannot inject into the PIC from
// the eventfd's wakeup context, so a kernel worker thread does it (a hop outside this process).
// ioctl: KVM_IRQ_LINE up and down from the calling thread: two syscalls, no hop.
enum class IrqInject { kIrqfd, kIoctl };

class KvmIrqLine final : public devices::IrqLine {
 public:
  KvmIrqLine(const Vm& vm, std::uint32_t gsi, IrqInject inject = IrqInject::kIrqfd,
             bool track_acks = false);
  ~KvmIrqLine() override;
  KvmIrqLine(const KvmIrqLine&) = delete;
  KvmIrqLine& operator=(const KvmIrqLine&) = delete;

  void set_level(bool asserted) noexcept override;
  void pulse() noexcept override;
  void pulse_now() noexcept override;
  bool pulse_checked() noexcept override;
  std::optional<std::uint64_t> acknowledgements() noexcept override;
  void stop_acknowledgements() noexcept override;
  // Re-binds the resampling irqfd: the unbind drops the level its resampler held, the bind
  // counts acknowledgements on the same eventfd again. Two KVM_IRQFD ioctls.
  bool release_held_level() noexcept override;
  // pulse_now() and pulse_checked() through the irqfd as well (kvm_irq_line.cc says why): for
  // a line whose every edge is this object's, as the PIT's without a pulse train.
  void pulse_through_irqfd_only() noexcept { pulses_through_irqfd_only_ = true; }

 private:
  // Whether every pulse must go through the irqfd (a resampler holds the line: kvm_irq_line.cc).
  bool one_source() const noexcept;

 public:

  IrqInject inject() const noexcept { return inject_; }
  std::uint32_t gsi() const noexcept { return gsi_; }

 private:
  const Vm& vm_;
  const std::uint32_t gsi_;
  const IrqInject inject_;
  UniqueFd irqfd_;
  UniqueFd resamplefd_;      // valid with track_acks
  bool pulses_through_irqfd_only_ = false;
  std::uint64_t acks_ = 0;   // read from resamplefd_ so far; callers serialize (the PIT's lock)
};

}  // namespace minivmm::vmm
