// What a kernel loader hands back: the vCPU start state and the placement facts the VMM logs.
#pragma once

#include <cstdint>

#include "vmm/vcpu/x86_boot_state.h"

namespace minivmm::vmm {

struct LoadedKernel {
  X86BootState boot_state;
  std::uint64_t load_addr = 0;   // lowest guest address the kernel image occupies
  std::uint64_t load_end = 0;    // one past the highest (including bss / init_size)
  std::uint64_t entry_addr = 0;  // == boot_state.rip
  // The structure the entry convention points at: the zero page (bzImage, RSI), the
  // hvm_start_info (PVH, EBX) or the multiboot info (EBX).
  std::uint64_t boot_info_addr = 0;
  std::uint64_t cmdline_addr = 0;
  std::uint64_t initrd_addr = 0;  // 0 when no initrd was given
  std::uint64_t initrd_size = 0;
  std::uint16_t protocol_version = 0;  // bzImage boot protocol, e.g. 0x020f; 0 for ELF kernels
  // A BIOS-like start (multiboot): the IVT with its INT 08h handler is in place, so the VMM
  // leaves the PIT ticking at 18.2 Hz with IRQ0 unmasked, as a PC BIOS does (vmm/boot/bios_ivt.h).
  bool bios_timer = false;
  // Where the ACPI tables put the FACS (0: no tables written): an S3 wake reads the guest's
  // firmware waking vector there.
  std::uint64_t acpi_facs_addr = 0;
};

}  // namespace minivmm::vmm
