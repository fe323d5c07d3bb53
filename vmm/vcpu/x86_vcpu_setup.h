// The x86 state a vCPU needs before its first KVM_RUN, written through its fd: CPUID (carrying
// this vCPU's own APIC id), the boot CPU's segment and general registers from an X86BootState,
// the MSRs and FPU state a PC firmware leaves behind, the local APIC's LINT pins, and an
// application processor's wait-for-SIPI state.
//
// Apart from Vcpu because it is one-time register set-up with its own knowledge (the kernel's
// ioctl layouts, what a BIOS programs), and shares nothing with the thread, the pause protocol
// or exit handling; Vcpu::configure() and configure_ap() are now one call each.
//
// Threads: the caller's (the main thread, before the vCPU thread starts). Every function throws
// VmmError naming the ioctl that failed.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <vector>

#include "vmm/vcpu/x86_boot_state.h"

namespace minivmm::vmm {

// The boot CPU (vCPU `index`, normally 0): CPUID, `state`'s registers, the firmware MSRs and FPU,
// and LINT0 = ExtINT, LINT1 = NMI, so that the 8259 reaches it as it does on a PC.
void set_up_boot_vcpu(int vcpu_fd, int index, const X86BootState& state,
                      const std::vector<kvm_cpuid_entry2>& cpuid);

// An application processor: CPUID, MSRs, FPU and LINT1 = NMI, but LINT0 left masked (only the
// BSP takes the 8259's ExtINT, MP spec 3.6.2.2 / SDM 10.5.1), no registers (its INIT/SIPI sets
// them), and MP state wait-for-SIPI.
void set_up_application_vcpu(int vcpu_fd, int index, const std::vector<kvm_cpuid_entry2>& cpuid);

// An ACPI S3 resume (the VM paused, every vCPU parked), as QEMU's reset and SeaBIOS's resume
// path leave the CPUs: the boot CPU in real mode at the FACS firmware waking vector (CS =
// vector >> 4, IP = vector & 0xf, everything else as after INIT), the others waiting for
// SIPI. Threads: the loop thread, while the vCPUs are parked.
void set_up_s3_resume(int vcpu_fd, std::uint32_t waking_vector);
void set_up_s3_resume_ap(int vcpu_fd);

}  // namespace minivmm::vmm
