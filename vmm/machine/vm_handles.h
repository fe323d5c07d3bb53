// KVM and the sandbox, opened once every input has been judged: /dev/kvm, the VM (guest RAM
// as its memory slot, the in-kernel irqchip), and the seccomp sandbox with the facts its
// allow-lists are made from (which syscalls this configuration's threads will make).
#pragma once

#include "devices/bus/guest_memory.h"
#include "vmm/kvm/kvm.h"
#include "vmm/kvm/vm.h"
#include "vmm/machine/config.h"
#include "vmm/sandbox/seccomp_allow_lists.h"
#include "vmm/sandbox/seccomp_sandbox.h"

namespace minivmm::vmm {

struct VmHandles {
  // Throws VmmError: kKvmUnavailable (named), kHostFailure for the sandbox.
  VmHandles(const Config& config, devices::GuestMemory ram);

  Kvm kvm;
  Vm vm;
  // Before every thread it filters: it installs the SIGSYS report handler (main thread only).
  SeccompSandbox sandbox;
  // blk_uring is set later, when a disk gets its io_uring.
  SeccompFacts facts;
};

}  // namespace minivmm::vmm
