// Loads an uncompressed ELF64 kernel (Linux vmlinux) through the PVH boot ABI
// (xen docs/misc/pvh.pandoc): segments at their physical addresses, an hvm_start_info in low
// memory, and a 32-bit protected-mode, paging-off start at the XEN_ELFNOTE_PHYS32_ENTRY address
// with EBX pointing at the start info. Skips the bzImage decompressor entirely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "vmm/boot/loaded_kernel.h"
#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

struct PvhOptions {
  std::string_view cmdline;
  std::span<const std::byte> initrd;  // empty: no module
  // hvm_start_info.rsdp_paddr; without it Linux scans 0xe0000-0xfffff for the RSDP.
  std::optional<std::uint64_t> acpi_rsdp_addr;
};

// Throws BootError when the image is not an x86-64 ELF executable, has no PVH entry note, or a
// segment, the command line or the initrd does not fit guest RAM.
LoadedKernel load_pvh_kernel(const devices::GuestMemory& mem, std::span<const std::byte> image,
                             const PvhOptions& opts);

}  // namespace minivmm::vmm
