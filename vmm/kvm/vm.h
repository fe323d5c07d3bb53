// One KVM virtual machine: guest RAM (one mmap at guest physical 0), the in-kernel irqchip
// (PIC + IOAPIC + LAPIC), optionally KVM's in-kernel PIT as a comparison baseline.
//
// Threads: setup methods on the main thread before vCPUs start; irq_line() from any thread
// (KVM serialises injection itself).
#pragma once

#include <cstddef>
#include <cstdint>

#include "devices/bus/guest_memory.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/unique_fd.h"

namespace minivmm::vmm {

class Vm {
 public:
  // Creates the VM with `ram` (a GuestRamMapping's view, which must outlive the Vm) as its memory at
  // guest physical 0, the TSS/identity-map pages Intel's real-mode emulation needs, and the
  // in-kernel irqchip. Throws VmmError.
  Vm(const Kvm& kvm, devices::GuestMemory ram);
  ~Vm();
  Vm(const Vm&) = delete;
  Vm& operator=(const Vm&) = delete;

  int fd() const noexcept { return fd_.get(); }
  const Kvm& kvm() const noexcept { return kvm_; }
  devices::GuestMemory memory() const noexcept { return memory_; }

  // Leaves the in-kernel 8259s as a PC BIOS does before it boots anything: initialised (ICW1-4
  // done, 8086 mode) with vectors 0x08-0x0f (master) and 0x70-0x77 (slave), every line masked
  // but the cascade (IRQ2) and, with `timer_unmasked`, the BIOS timer (IRQ0). After
  // KVM_CREATE_IRQCHIP they are in their reset state instead, with vector base 0. Kernels that
  // program the PICs themselves (Linux) are unaffected.
  void set_pics_as_bios_leaves_them(bool timer_unmasked = false);
  // KVM's in-kernel i8254 (KVM_CREATE_PIT2), the --pit kvm baseline.
  void create_kernel_pit();

  // Raises or lowers a GSI; returns KVM's status (> 0 delivered, 0 coalesced, < 0 error).
  int irq_line(std::uint32_t gsi, bool level) const noexcept;

  // Registers `eventfd` so that each write to it pulses `gsi` inside KVM (KVM_IRQFD).
  // With `resamplefd` >= 0 the irqfd is KVM's resampling kind: an eventfd write raises the GSI
  // and KVM holds it until the guest acknowledges (EOI) the interrupt, then lowers it and
  // signals `resamplefd`. That count of acknowledgements is how a pulse that merged with a
  // still-pending one is found (vmm/kvm/kvm_irq_line.h).
  void add_irqfd(int eventfd, std::uint32_t gsi, int resamplefd = -1) const;
  void remove_irqfd(int eventfd, std::uint32_t gsi) const noexcept;

  // Makes a 4-byte guest write of `datamatch` to MMIO address `gpa` signal `eventfd` inside
  // KVM instead of exiting to the vCPU thread (KVM_IOEVENTFD with DATAMATCH).
  void add_ioeventfd(int eventfd, std::uint64_t gpa, std::uint32_t datamatch) const;
  void remove_ioeventfd(int eventfd, std::uint64_t gpa, std::uint32_t datamatch) const noexcept;

 private:
  const Kvm& kvm_;
  UniqueFd fd_;
  devices::GuestMemory memory_;
};

}  // namespace minivmm::vmm
