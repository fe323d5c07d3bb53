// The guest physical memory map in BIOS e820 form. bzImage boot_params, the PVH memmap and the
// multiboot mmap are all built from this one list so the three boot paths agree.
#pragma once

#include <cstdint>
#include <vector>

namespace minivmm::vmm {

// ACPI "Address Range Types" (ACPI 6.5 table 15.1), which e820 and the PVH memmap share.
enum class E820Type : std::uint32_t {
  kRam = 1,
  kReserved = 2,
  kAcpi = 3,
  kNvs = 4,
  kUnusable = 5,
};

struct E820Entry {
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  E820Type type = E820Type::kRam;

  bool operator==(const E820Entry&) const = default;
};

// Low RAM [0, EBDA), the EBDA/VGA/BIOS hole reserved, then RAM from 1 MiB to `ram_size`.
// Throws BootError when `ram_size` is not above 1 MiB or is above kMaxRamSize (RAM above the
// 32-bit MMIO hole would need a split map the VMM does not lay out yet).
std::vector<E820Entry> build_e820_map(std::uint64_t ram_size);

}  // namespace minivmm::vmm
