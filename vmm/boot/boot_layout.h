// Where the loaders put things in guest physical memory. One table so overlaps are visible at
// a glance; every loader uses the same map.
//
//   0x00000 - 0x004ff  real-mode IVT and BIOS data area: left alone (Linux reads the EBDA
//                      pointer at 0x40e and copes with zero)
//   0x01000 - 0x0102f  boot GDT (null, null, code 0x10, data 0x18, TSS 0x20 (16 bytes))
//   0x01080 - 0x010e7  boot TSS (zeroed, only so TR is usable; KVM refuses an unusable TR)
//   0x06000 - 0x06fff  PVH hvm_start_info / multiboot info and their tables
//   0x07000 - 0x07fff  Linux zero page (struct boot_params)
//   0x08000 - 0x08fff  boot stack, top at 0x8ff0
//   0x09000 - 0x0efff  identity page tables: PML4, PDPT, four PDs (4 GiB in 2 MiB pages)
//   0x20000 - ...      kernel command line (must end below the EBDA)
//   0x9fc00 - 0xfffff  EBDA, VGA hole, BIOS ROM area: e820-reserved
//   0xe0000 - ...      ACPI tables, RSDP first (Linux scans 0xe0000-0xfffff for it)
//   0x100000 -         kernel image, then (bzImage/PVH) the initrd as high as allowed
#pragma once

#include <cstdint>

namespace minivmm::vmm {

inline constexpr std::uint64_t kPageSize = 0x1000;
// The end of what a 32-bit boot protocol entry point or initrd pointer can address.
inline constexpr std::uint64_t k4GiB = 1ull << 32;

inline constexpr std::uint64_t kGdtAddr = 0x1000;
inline constexpr std::uint64_t kTssAddr = 0x1080;
inline constexpr std::uint64_t kBootInfoAddr = 0x6000;  // PVH start info or multiboot info
inline constexpr std::uint64_t kZeroPageAddr = 0x7000;
inline constexpr std::uint64_t kBootStackBase = 0x8000;
inline constexpr std::uint64_t kBootStackTop = 0x8ff0;  // 16-byte aligned, inside the stack page
inline constexpr std::uint64_t kPml4Addr = 0x9000;
inline constexpr std::uint64_t kPdptAddr = 0xa000;
inline constexpr std::uint64_t kPdAddr = 0xb000;        // four consecutive PD pages
inline constexpr std::uint64_t kPageTablesEnd = 0xf000;
inline constexpr std::uint64_t kCmdlineAddr = 0x20000;

// The legacy PC holes (boot.rst "Memory layout"; the EBDA conventionally starts at 639 KiB).
inline constexpr std::uint64_t kEbdaStart = 0x9fc00;
inline constexpr std::uint64_t kBiosAreaStart = 0xe0000;  // RSDP scan window start
inline constexpr std::uint64_t kBiosAreaEnd = 0x100000;
inline constexpr std::uint64_t kHighMemStart = 0x100000;  // 1 MiB: protected-mode kernels

// The VMM keeps guest RAM below the 32-bit PCI/MMIO hole (IOAPIC at 0xfec00000, LAPIC at
// 0xfee00000), so one RAM block starting at 0 needs no split e820 entry.
inline constexpr std::uint64_t kMaxRamSize = 0xc0000000;

}  // namespace minivmm::vmm
