// Loads a multiboot v1 ELF32 kernel, the format kvm-unit-tests' x86 tests use: PT_LOAD segments
// at their physical addresses, a multiboot info block in low memory, the initrd as the one
// module after the image, and a 32-bit protected-mode, paging-off start with EAX = 0x2badb002
// and EBX = the info block (Multiboot Specification 0.6.96, 3.2 "Machine state").
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "vmm/boot/loaded_kernel.h"
#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

struct MultibootOptions {
  std::string_view cmdline;
  std::span<const std::byte> initrd;  // empty: no module
};

// Segments may lie anywhere in RAM, below 1 MiB included, except over the loader's GDT/TSS
// page (0x1000), info page (0x6000) and command line (0x20000).
// Throws BootError when there is no valid multiboot header in the first 8 KiB, the header asks
// for something this loader cannot provide (video mode, a.out kludge), the image is not an
// ELF32 i386 executable, a segment overlaps those structures, or anything does not fit RAM.
LoadedKernel load_multiboot_kernel(const devices::GuestMemory& mem, std::span<const std::byte> image,
                                   const MultibootOptions& opts);

}  // namespace minivmm::vmm
