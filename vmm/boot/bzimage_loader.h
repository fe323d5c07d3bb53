// Loads a Linux bzImage and prepares a 64-bit boot (Documentation/arch/x86/boot.rst, "64-bit
// Boot Protocol"): the protected-mode kernel goes to its load address, a zero page describes the
// command line, initrd and e820 map, and the vCPU starts in long mode at load address + 0x200
// with RSI pointing at the zero page. The 16-bit setup code is never run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "vmm/boot/boot_layout.h"
#include "vmm/boot/loaded_kernel.h"
#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

struct BzImageOptions {
  std::string_view cmdline;
  std::span<const std::byte> initrd;  // empty: no initrd
  // Written to boot_params.acpi_rsdp_addr when the kernel speaks protocol 2.14+. Older kernels
  // ignore the field and scan 0xe0000-0xfffff, which is where write_acpi_tables puts the RSDP.
  std::optional<std::uint64_t> acpi_rsdp_addr;
  // Low-memory placement; both must lie below the EBDA and clear of the boot GDT, stack and
  // page tables (see boot_layout.h).
  std::uint64_t zero_page_addr = kZeroPageAddr;
  std::uint64_t cmdline_addr = kCmdlineAddr;
};

// Validates `image`, writes kernel, zero page, command line, initrd, GDT and page tables into
// `mem`, and returns the long-mode start state. Throws BootError naming the offending header
// field or placement on any problem; `mem` may then be partly written.
LoadedKernel load_bzimage(const devices::GuestMemory& mem, std::span<const std::byte> image,
                          const BzImageOptions& opts);

}  // namespace minivmm::vmm
