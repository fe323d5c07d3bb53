// The log lines a vCPU writes when the run ends on a fault (a triple fault, an emulation
// failure, a failed entry, a failed KVM_RUN): the reason, KVM's internal-error data, the
// general, segment and control registers, and the 16 bytes at the faulting rip, found through
// KVM_TRANSLATE, so that the log alone shows where the guest was and what it tried to execute.
//
// Apart from Vcpu because it is diagnosis, not running: it reads state through the vCPU fd and
// guest RAM and changes nothing. It makes only the ioctls the vCPU thread's seccomp allow-list
// grants for it (KVM_GET_REGS, KVM_GET_SREGS, KVM_TRANSLATE: sandbox/seccomp_allow_lists.cc).
//
// Threads: the vCPU thread that owns `vcpu_fd` and `run`, after KVM_RUN has returned.
#pragma once

#include <linux/kvm.h>

#include <string>

#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

// Logs `what` and the rest of the report at error level, each line prefixed "vcpu<index>: ".
// What cannot be read (registers, an untranslatable or out-of-RAM rip) is said or left out.
void log_crash_report(int vcpu_fd, int index, const kvm_run& run,
                      const devices::GuestMemory& memory, const std::string& what);

}  // namespace minivmm::vmm
