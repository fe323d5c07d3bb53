// The 64-bit start state for kernels entered in long mode (the Linux 64-bit boot protocol).
#pragma once

#include "devices/bus/guest_memory.h"
#include "vmm/vcpu/x86_boot_state.h"

namespace minivmm::vmm {

// Writes the boot GDT (code 0x10, data 0x18, busy TSS 0x20), a zeroed TSS, and page tables
// identity-mapping the first 4 GiB with 2 MiB pages at kPml4Addr..kPageTablesEnd, and returns
// the long-mode state (CR0/CR3/CR4/EFER, segments, GDTR; IDT empty, interrupts off). The caller
// sets rip, rsp and the entry convention's argument registers.
X86BootState setup_long_mode(const devices::GuestMemory& mem);

}  // namespace minivmm::vmm
