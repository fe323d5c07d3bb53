// The ACPI tables a Linux guest needs to find its CPUs and IOAPIC: RSDP (v2) -> XSDT ->
// {FADT -> DSDT, FACS; MADT}. Written into the BIOS area at 0xe0000, where Linux's RSDP scan
// looks when no boot protocol field hands it the address.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

inline constexpr std::uint64_t kIoApicAddr = 0xfec00000;
inline constexpr std::uint64_t kLocalApicAddr = 0xfee00000;
inline constexpr std::uint32_t kMaxAcpiCpus = 254;  // xAPIC ids are 8-bit, 0xff is broadcast,
                                                    // and the IOAPIC takes id num_cpus

struct AcpiMmioDevice {
  std::uint32_t base = 0;
  std::uint32_t size = 0;
  std::uint32_t gsi = 0;
};

struct AcpiConfig {
  std::uint32_t num_cpus = 1;
  std::uint8_t sci_irq = 9;  // the PC convention (PIIX4 routes the SCI to IRQ 9)
  // PM1a event (4 bytes) and control (2 bytes) I/O blocks and the PM timer (4 bytes), 0 when
  // the VMM emulates none. Without the control block the guest has no ACPI power-off/sleep
  // (Linux logs a firmware warning and boots on); with it the DSDT offers _S3 and _S5 with
  // QEMU's SLP_TYP values (devices/pc/acpi_pm.h).
  std::uint16_t pm1a_evt_port = 0;
  std::uint16_t pm1a_cnt_port = 0;
  std::uint16_t pm_tmr_port = 0;
  // QEMU's pvpanic (_HID QEMU0001) at this I/O port, in the DSDT; none without it.
  std::optional<std::uint16_t> pvpanic_port;
  // virtio-mmio windows announced in the DSDT as _HID LNRO0005 (what Linux's virtio_mmio
  // matches through ACPI), for kernels built without CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES (every
  // Debian kernel). Empty: none (the command line's virtio_mmio.device= words do it).
  std::vector<AcpiMmioDevice> virtio_mmio;
};

// Guest-physical addresses of what write_acpi_tables wrote.
struct AcpiTables {
  std::uint64_t rsdp_addr = 0;  // pass to boot_params.acpi_rsdp_addr / hvm_start_info.rsdp_paddr
  std::uint64_t xsdt_addr = 0;
  std::uint64_t fadt_addr = 0;
  std::uint64_t facs_addr = 0;
  std::uint64_t dsdt_addr = 0;
  std::uint64_t madt_addr = 0;
  std::uint64_t end_addr = 0;  // one past the last table byte
};

// Throws BootError when num_cpus is 0 or above kMaxAcpiCpus, or sci_irq is not an ISA IRQ.
AcpiTables write_acpi_tables(const devices::GuestMemory& mem, const AcpiConfig& config);

}  // namespace minivmm::vmm
