// Picks the loader for a kernel file by its contents: a multiboot v1 header in the first 8 KiB
// (kvm-unit-tests' .flat files, realmode.flat included: it is a multiboot ELF32 that drops to
// real mode itself), an ELF with a PVH note (vmlinux), else a Linux bzImage. Throws VmmError
// with the loader's one-line reason: kBadKernel for a bad image, kUsage for a good one that
// needs more RAM than --memory gives or whose command line is too long for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <optional>

#include "vmm/boot/acpi_tables.h"
#include "vmm/boot/loaded_kernel.h"
#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

// `cpus` goes into the MADT; `pvpanic_port`, where the board has a pvpanic device, into the
// DSDT (Linux finds it only there); `acpi_pm_port`, the board's ACPI PM block
// (devices/pc/acpi_pm.h: PM1a event at +0, control at +4, the PM timer at +8), into the FADT,
// with _S3 and _S5 in the DSDT. Multiboot kernels also get what a BIOS leaves behind: the
// real-mode IVT (bios_ivt.h) and the ACPI tables in the BIOS area, each unless the image
// itself occupies that memory. A multiboot kernel's command line starts with `kernel_name`
// (the --kernel path) when one is given, as GRUB and QEMU pass it: kvm-unit-tests takes the
// first word as argv[0] and the rest as its arguments. `acpi_virtio`: virtio-mmio windows to
// announce in the DSDT (for kernels that cannot take them from the command line).
LoadedKernel load_guest_kernel(const devices::GuestMemory& mem, std::span<const std::byte> image,
                               const std::string& cmdline, std::span<const std::byte> initrd,
                               std::uint32_t cpus = 1, std::string_view kernel_name = {},
                               std::optional<std::uint16_t> pvpanic_port = std::nullopt,
                               std::optional<std::uint16_t> acpi_pm_port = std::nullopt,
                               std::vector<AcpiMmioDevice> acpi_virtio = {});

}  // namespace minivmm::vmm
