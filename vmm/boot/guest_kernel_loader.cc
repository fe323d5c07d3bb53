#include "vmm/boot/guest_kernel_loader.h"

#include <cerrno>
#include <cstring>

#include "vmm/boot/boot_error.h"
#include "vmm/boot/acpi_tables.h"
#include "vmm/boot/bios_ivt.h"
#include "vmm/boot/boot_layout.h"
#include "vmm/boot/bzimage_loader.h"
#include "vmm/boot/multiboot_loader.h"
#include "vmm/boot/pvh_loader.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {

LoadedKernel load_guest_kernel(const devices::GuestMemory& mem, std::span<const std::byte> image,
                               const std::string& cmdline, std::span<const std::byte> initrd,
                               std::uint32_t cpus, std::string_view kernel_name,
                               std::optional<std::uint16_t> pvpanic_port,
                               std::optional<std::uint16_t> acpi_pm_port,
                               std::vector<AcpiMmioDevice> acpi_virtio) {
  AcpiConfig acpi_config;
  acpi_config.virtio_mmio = std::move(acpi_virtio);
  acpi_config.num_cpus = cpus;
  acpi_config.pvpanic_port = pvpanic_port;
  if (acpi_pm_port) {
    acpi_config.pm1a_evt_port = *acpi_pm_port;
    acpi_config.pm1a_cnt_port = static_cast<std::uint16_t>(*acpi_pm_port + 4);
    acpi_config.pm_tmr_port = static_cast<std::uint16_t>(*acpi_pm_port + 8);
  }
  try {
    // Multiboot v1: the magic, 4-byte aligned, in the first 8 KiB (multiboot spec 3.1.1). The
    // checksum and the rest are the loader's to validate.
    bool multiboot = false;
    for (std::size_t off = 0; off + 12 <= image.size() && off < 8192; off += 4) {
      std::uint32_t magic;
      std::memcpy(&magic, image.data() + off, 4);
      if (magic == 0x1BADB002u) {
        multiboot = true;
        break;
      }
    }
    if (multiboot) {
      // QEMU's multiboot loader and GRUB both put the kernel's file name first; without it
      // kvm-unit-tests took `-append ipi` as its program name and ran every vmexit test.
      std::string full_cmdline(kernel_name);
      if (!cmdline.empty()) {
        if (!full_cmdline.empty()) full_cmdline += ' ';
        full_cmdline += cmdline;
      }
      MultibootOptions opts;
      opts.cmdline = full_cmdline;
      opts.initrd = initrd;
      LoadedKernel k = load_multiboot_kernel(mem, image, opts);
      // What QEMU's SeaBIOS leaves for the kernel: the IVT and, in the BIOS area where
      // kvm-unit-tests' lib/acpi.c scans for the RSDP, the ACPI tables (the MADT lists every
      // CPU). A kernel loaded over either keeps its own bytes there.
      const bool image_over_iret = k.load_addr <= kBiosIretAddr && kBiosIretAddr < k.load_end;
      const bool image_over_bios = k.load_addr <= kBiosTimerAddr + 32 && kBiosTimerAddr < k.load_end;
      if (k.load_addr >= kIvtAddr + kIvtBytes && !image_over_iret && !image_over_bios) {
        write_bios_ivt(mem);
        k.bios_timer = true;
      }
      if (k.load_end <= kBiosAreaStart || k.load_addr >= kBiosAreaEnd) {
        k.acpi_facs_addr = write_acpi_tables(mem, acpi_config).facs_addr;
      }
      return k;
    }
    // ACPI tables in the BIOS area, where Linux finds them (Debian kernels have no MP-table
    // parser, so ACPI is how they learn about the local APIC and the IOAPIC).
    const AcpiTables acpi = write_acpi_tables(mem, acpi_config);
    const bool elf = image.size() >= 4 && image[0] == std::byte{0x7f} &&
                     image[1] == std::byte{'E'} && image[2] == std::byte{'L'} &&
                     image[3] == std::byte{'F'};
    if (elf) {
      PvhOptions opts;
      opts.cmdline = cmdline;
      opts.initrd = initrd;
      opts.acpi_rsdp_addr = acpi.rsdp_addr;
      LoadedKernel k = load_pvh_kernel(mem, image, opts);
      k.acpi_facs_addr = acpi.facs_addr;
      return k;
    }
    BzImageOptions opts;
    opts.cmdline = cmdline;
    opts.initrd = initrd;
    opts.acpi_rsdp_addr = acpi.rsdp_addr;
    LoadedKernel k = load_bzimage(mem, image, opts);
    k.acpi_facs_addr = acpi.facs_addr;
    return k;
  } catch (const BootError& e) {
    switch (e.cause()) {
      case BootError::Cause::kRamTooSmall:
        throw VmmError(ExitCode::kUsage, "--memory is too small: " +
                                             std::string(e.what()));
      case BootError::Cause::kCmdlineTooLong:
        throw VmmError(ExitCode::kUsage, "--cmdline is too long: " + std::string(e.what()));
      case BootError::Cause::kImage:
        break;
    }
    throw VmmError(ExitCode::kBadKernel, std::string("bad kernel image: ") + e.what());
  } catch (const std::out_of_range& e) {
    throw VmmError(ExitCode::kBadKernel, std::string("bad kernel image: ") + e.what());
  }
}

}  // namespace minivmm::vmm
