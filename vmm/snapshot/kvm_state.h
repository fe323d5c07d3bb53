// What KVM keeps of a VM and its vCPUs, as snapshot records (devices/bus/device_state.h's
// StateWriter format), and back. Nothing here is minivmm's own state: that is the devices'.
//
// A vCPU (save order as Firecracker's, MP state first: reading it makes KVM accept pending
// INIT/SIPI events first): MP state, general and special registers, FPU/SSE/AVX (XSAVE where
// KVM offers it, else the legacy FPU area), XCRs, debug registers, the local APIC's registers,
// every MSR KVM lists (KVM_GET_MSR_INDEX_LIST: the TSC, kvmclock's, the SYSCALL and PAT MSRs,
// ...), and the pending exception, interrupt and NMI (vcpu events). Restore sets them in the
// same order, with the events last, after what they depend on.
//
// The VM: both 8259s and the IOAPIC (KVM_GET_IRQCHIP), kvmclock's base (KVM_GET_CLOCK), and
// with --pit kvm KVM's PIT (KVM_GET_PIT2).
//
// Bad input: a record is checked for its shape (StateReader); what its values mean is KVM's to
// judge, and KVM refusing one (EINVAL on KVM_SET_SREGS, say) is a SnapshotError naming it.
//
// Threads: the loop thread, with every vCPU parked (not in KVM_RUN): KVM takes the vCPU's mutex
// for these ioctls, so a running vCPU would only delay them, but its registers would be stale.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "vmm/kvm/kvm.h"

namespace minivmm::vmm {

// What the vCPU records depend on, asked of /dev/kvm once before the sandbox (the loop thread's
// filter allows no ioctl on the system fd).
struct KvmStateCaps {
  bool xsave = false;
  // The XSAVE area's size (KVM_CAP_XSAVE2: larger than struct kvm_xsave's 4 KiB where the host
  // has AVX-512 or AMX state, and then KVM_GET_XSAVE refuses; KVM_GET_XSAVE2 takes the size).
  std::size_t xsave_bytes = 0;
  bool xsave2 = false;
  bool xcrs = false;
  std::vector<std::uint32_t> msr_indices;  // KVM_GET_MSR_INDEX_LIST
};
KvmStateCaps probe_kvm_state_caps(const Kvm& kvm);

struct VcpuStateStats {
  std::uint32_t msrs = 0;          // MSRs saved or restored
  std::uint32_t msrs_refused = 0;  // restore: MSRs this host's KVM would not take (logged)
};

std::vector<std::uint8_t> save_vcpu_state(const KvmStateCaps& caps, int vcpu_fd, int index,
                                          VcpuStateStats* stats = nullptr);
void load_vcpu_state(const KvmStateCaps& caps, int vcpu_fd, int index, std::span<const std::uint8_t> record,
                     VcpuStateStats* stats = nullptr);

// `kernel_pit`: the VM has KVM's PIT (--pit kvm). `kvmclock_ns`: kvmclock as it read when
// vm_clock stopped (Machine::pause() holds both still), so the guest's two clocks go on together.
std::vector<std::uint8_t> save_vm_state(int vm_fd, bool kernel_pit, std::uint64_t kvmclock_ns);
// kvmclock (KVM_GET_CLOCK / KVM_SET_CLOCK): a pause reads it as the vCPUs park and sets it
// back on resume, so the guest's clock, like vm_clock, does not count the pause.
std::uint64_t read_kvm_clock(int vm_fd);
// kvmclock as the guest reads it now: its pvclock page for the vCPU (found through the vCPU's
// MSR_KVM_SYSTEM_TIME) advanced by the vCPU's TSC, as QEMU's kvmclock does where KVM_GET_CLOCK
// is not TSC-stable. That view can run ahead of KVM_GET_CLOCK's: restoring the latter made a
// guest's clock go back 156 us across a restore (nested KVM). nullopt without kvmclock enabled.
std::optional<std::uint64_t> guest_kvmclock_ns(int vcpu_fd, devices::GuestMemory ram);
void set_kvm_clock(int vm_fd, std::uint64_t ns);

// KVM's PIT (--pit kvm) runs on host time: a pause reads it and the resume sets it back, which
// restarts its counters' phase then, so the paused time is not replayed as reinjected ticks.
kvm_pit_state2 read_kvm_pit(int vm_fd);
void set_kvm_pit(int vm_fd, const kvm_pit_state2& state);

void load_vm_state(int vm_fd, bool kernel_pit, std::span<const std::uint8_t> record);

}  // namespace minivmm::vmm
