// An ISA interrupt line wired into KVM's in-kernel irqchip. Pulses go through an irqfd: one
// eventfd write, and KVM raises and lowers the line itself, so a PIT tick costs the loop
// thread one syscall and never kicks a vCPU out to user space. Level changes and checked pulses
// use KVM_IRQ_LINE_STATUS, which also tells whether the edge was coalesced.
#pragma once

#include <cstdint>

#include "devices/irq_line.h"
#include "vmm/unique_fd.h"
#include "vmm/vm.h"

namespace minivmm::vmm {

// How pulse() reaches KVM. irqfd: one eventfd write, but KVM cannot inject into the PIC from
// the eventfd's wakeup context, so a kernel worker thread does it (a hop outside this process).
// ioctl: KVM_IRQ_LINE up and down from the calling thread: two syscalls, no hop.
enum class IrqInject { kIrqfd, kIoctl };

class KvmIrqLine final : public devices::IrqLine {
 public:
  KvmIrqLine(const Vm& vm, std::uint32_t gsi, IrqInject inject = IrqInject::kIrqfd);
  ~KvmIrqLine() override;
  KvmIrqLine(const KvmIrqLine&) = delete;
  KvmIrqLine& operator=(const KvmIrqLine&) = delete;

  void set_level(bool asserted) noexcept override;
  void pulse() noexcept override;
  bool pulse_checked() noexcept override;

  IrqInject inject() const noexcept { return inject_; }

 private:
  const Vm& vm_;
  const std::uint32_t gsi_;
  const IrqInject inject_;
  UniqueFd irqfd_;
};

}  // namespace minivmm::vmm
