// Copies an ELF executable's PT_LOAD segments into guest RAM at their physical addresses.
#pragma once

#include <cstdint>
#include <span>

#include "vmm/boot/boot_layout.h"

#include "vmm/boot/elf_file.h"
#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

struct LoadedSegments {
  std::uint64_t start = 0;  // lowest p_paddr
  std::uint64_t end = 0;    // highest p_paddr + p_memsz
};

// A guest-physical range [start, end) the loader's own structures use.
struct ReservedRange {
  std::uint64_t start;
  std::uint64_t end;
  const char* what;
};

// Everything below kHighMemStart: the boot GDT, page tables and info structures of the 64-bit
// protocols.
inline constexpr ReservedRange kLowMemoryReserved[] = {{0, kHighMemStart, "the low-memory boot area"}};

// Writes each PT_LOAD's file bytes at p_paddr and zeroes the rest of p_memsz (the bss).
// Throws BootError when there is no PT_LOAD, or a segment leaves guest RAM or overlaps one of
// `reserved`.
LoadedSegments load_elf_segments(const devices::GuestMemory& mem, const ElfFile& elf,
                                 std::span<const ReservedRange> reserved = kLowMemoryReserved);

}  // namespace minivmm::vmm
