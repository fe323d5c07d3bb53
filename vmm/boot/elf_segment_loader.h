// Copies an ELF executable's PT_LOAD segments into guest RAM at their physical addresses.
#pragma once

#include <cstdint>

#include "vmm/boot/elf_file.h"
#include "vmm/guest_memory.h"

namespace minivmm::vmm {

struct LoadedSegments {
  std::uint64_t start = 0;  // lowest p_paddr
  std::uint64_t end = 0;    // highest p_paddr + p_memsz
};

// Writes each PT_LOAD's file bytes at p_paddr and zeroes the rest of p_memsz (the bss).
// Throws BootError when there is no PT_LOAD, or a segment leaves guest RAM or reaches below
// kHighMemStart, where the boot GDT, page tables and info structures live.
LoadedSegments load_elf_segments(const GuestMemory& mem, const ElfFile& elf);

}  // namespace minivmm::vmm
