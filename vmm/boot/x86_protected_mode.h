// The 32-bit flat protected-mode start state, paging off, that the PVH and multiboot v1
// entry conventions share.
#pragma once

#include "devices/bus/guest_memory.h"
#include "vmm/vcpu/x86_boot_state.h"

namespace minivmm::vmm {

// Writes the boot GDT (32-bit code 0x10, data 0x18, busy TSS 0x20 with base 0 and limit 0x67 as
// the PVH spec words it) and returns CR0 = PE|ET, flat 4 GiB segments, IF clear. The caller sets
// rip and the convention's argument registers (EBX, and EAX for multiboot).
X86BootState setup_protected_mode(const devices::GuestMemory& mem);

}  // namespace minivmm::vmm
