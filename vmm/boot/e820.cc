#include "vmm/boot/e820.h"

#include "vmm/boot/boot_error.h"
#include "vmm/boot/boot_layout.h"

namespace minivmm::vmm {

std::vector<E820Entry> build_e820_map(std::uint64_t ram_size) {
  if (ram_size <= kHighMemStart) {
    throw BootError("guest RAM size " + to_hex(ram_size) +
                        " is too small: a PC memory map needs RAM above 1 MiB",
                    BootError::Cause::kRamTooSmall);
  }
  if (ram_size > kMaxRamSize) {
    throw BootError("guest RAM size " + to_hex(ram_size) + " exceeds the supported maximum " +
                    to_hex(kMaxRamSize) + " (RAM above the 32-bit MMIO hole is not mapped yet)");
  }
  return {
      {0, kEbdaStart, E820Type::kRam},
      // The EBDA, VGA window and BIOS area: the ACPI tables live here, and the guest must not
      // hand these pages to its allocator.
      {kEbdaStart, kHighMemStart - kEbdaStart, E820Type::kReserved},
      {kHighMemStart, ram_size - kHighMemStart, E820Type::kRam},
  };
}

}  // namespace minivmm::vmm
