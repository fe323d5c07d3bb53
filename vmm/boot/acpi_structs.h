// ACPI table layouts the VMM generates (ACPI 6.5 spec, chapter 5.2). Byte-exact, little-endian;
// each offset the spec lists is pinned by a static_assert.
#pragma once

#include <cstddef>
#include <cstdint>

namespace minivmm::vmm::acpi {

// 5.2.5.3 Root System Description Pointer, revision 2.
struct [[gnu::packed]] Rsdp {
  char signature[8];            // "RSD PTR "
  std::uint8_t checksum;        // over the first 20 bytes (the ACPI 1.0 part)
  char oem_id[6];
  std::uint8_t revision;        // 2: XSDT fields valid
  std::uint32_t rsdt_address;
  std::uint32_t length;
  std::uint64_t xsdt_address;
  std::uint8_t extended_checksum;  // over all 36 bytes
  std::uint8_t reserved[3];
};
static_assert(sizeof(Rsdp) == 36);
static_assert(offsetof(Rsdp, revision) == 15);
static_assert(offsetof(Rsdp, xsdt_address) == 24);
static_assert(offsetof(Rsdp, extended_checksum) == 32);

// 5.2.6 System Description Table Header.
struct [[gnu::packed]] SdtHeader {
  char signature[4];
  std::uint32_t length;
  std::uint8_t revision;
  std::uint8_t checksum;
  char oem_id[6];
  char oem_table_id[8];
  std::uint32_t oem_revision;
  char creator_id[4];
  std::uint32_t creator_revision;
};
static_assert(sizeof(SdtHeader) == 36);
static_assert(offsetof(SdtHeader, checksum) == 9);

// 5.2.3.2 Generic Address Structure.
struct [[gnu::packed]] Gas {
  std::uint8_t address_space_id;
  std::uint8_t register_bit_width;
  std::uint8_t register_bit_offset;
  std::uint8_t access_size;
  std::uint64_t address;
};
static_assert(sizeof(Gas) == 12);

// 5.2.9 Fixed ACPI Description Table, revision 6 layout (276 bytes).
struct [[gnu::packed]] Fadt {
  SdtHeader header;                 // "FACP"
  std::uint32_t firmware_ctrl;
  std::uint32_t dsdt;
  std::uint8_t reserved0;
  std::uint8_t preferred_pm_profile;
  std::uint16_t sci_int;
  std::uint32_t smi_cmd;
  std::uint8_t acpi_enable;
  std::uint8_t acpi_disable;
  std::uint8_t s4bios_req;
  std::uint8_t pstate_cnt;
  std::uint32_t pm1a_evt_blk;
  std::uint32_t pm1b_evt_blk;
  std::uint32_t pm1a_cnt_blk;
  std::uint32_t pm1b_cnt_blk;
  std::uint32_t pm2_cnt_blk;
  std::uint32_t pm_tmr_blk;
  std::uint32_t gpe0_blk;
  std::uint32_t gpe1_blk;
  std::uint8_t pm1_evt_len;
  std::uint8_t pm1_cnt_len;
  std::uint8_t pm2_cnt_len;
  std::uint8_t pm_tmr_len;
  std::uint8_t gpe0_blk_len;
  std::uint8_t gpe1_blk_len;
  std::uint8_t gpe1_base;
  std::uint8_t cst_cnt;
  std::uint16_t p_lvl2_lat;
  std::uint16_t p_lvl3_lat;
  std::uint16_t flush_size;
  std::uint16_t flush_stride;
  std::uint8_t duty_offset;
  std::uint8_t duty_width;
  std::uint8_t day_alrm;
  std::uint8_t mon_alrm;
  std::uint8_t century;
  std::uint16_t iapc_boot_arch;
  std::uint8_t reserved1;
  std::uint32_t flags;
  Gas reset_reg;
  std::uint8_t reset_value;
  std::uint16_t arm_boot_arch;
  std::uint8_t fadt_minor_version;
  std::uint64_t x_firmware_ctrl;
  std::uint64_t x_dsdt;
  Gas x_pm1a_evt_blk;
  Gas x_pm1b_evt_blk;
  Gas x_pm1a_cnt_blk;
  Gas x_pm1b_cnt_blk;
  Gas x_pm2_cnt_blk;
  Gas x_pm_tmr_blk;
  Gas x_gpe0_blk;
  Gas x_gpe1_blk;
  Gas sleep_control_reg;
  Gas sleep_status_reg;
  std::uint64_t hypervisor_vendor_identity;
};
static_assert(sizeof(Fadt) == 276);
static_assert(offsetof(Fadt, firmware_ctrl) == 36);
static_assert(offsetof(Fadt, sci_int) == 46);
static_assert(offsetof(Fadt, smi_cmd) == 48);
static_assert(offsetof(Fadt, pm1a_evt_blk) == 56);
static_assert(offsetof(Fadt, pm1a_cnt_blk) == 64);
static_assert(offsetof(Fadt, pm1_evt_len) == 88);
static_assert(offsetof(Fadt, iapc_boot_arch) == 109);
static_assert(offsetof(Fadt, flags) == 112);
static_assert(offsetof(Fadt, fadt_minor_version) == 131);
static_assert(offsetof(Fadt, x_firmware_ctrl) == 132);
static_assert(offsetof(Fadt, x_dsdt) == 140);
static_assert(offsetof(Fadt, hypervisor_vendor_identity) == 268);

// 5.2.10 Firmware ACPI Control Structure (no checksum; 64-byte aligned).
struct [[gnu::packed]] Facs {
  char signature[4];  // "FACS"
  std::uint32_t length;
  std::uint32_t hardware_signature;
  std::uint32_t firmware_waking_vector;
  std::uint32_t global_lock;
  std::uint32_t flags;
  std::uint64_t x_firmware_waking_vector;
  std::uint8_t version;
  std::uint8_t reserved0[3];
  std::uint32_t ospm_flags;
  std::uint8_t reserved1[24];
};
static_assert(sizeof(Facs) == 64);
static_assert(offsetof(Facs, version) == 32);

// 5.2.12 Multiple APIC Description Table header and the entries we emit.
struct [[gnu::packed]] MadtHeader {
  SdtHeader header;  // "APIC"
  std::uint32_t local_apic_address;
  std::uint32_t flags;
};
static_assert(sizeof(MadtHeader) == 44);

struct [[gnu::packed]] MadtLocalApic {  // 5.2.12.2, type 0
  std::uint8_t type;
  std::uint8_t length;
  std::uint8_t acpi_processor_uid;
  std::uint8_t apic_id;
  std::uint32_t flags;
};
static_assert(sizeof(MadtLocalApic) == 8);

struct [[gnu::packed]] MadtIoApic {  // 5.2.12.3, type 1
  std::uint8_t type;
  std::uint8_t length;
  std::uint8_t io_apic_id;
  std::uint8_t reserved;
  std::uint32_t io_apic_address;
  std::uint32_t global_system_interrupt_base;
};
static_assert(sizeof(MadtIoApic) == 12);

struct [[gnu::packed]] MadtInterruptOverride {  // 5.2.12.5, type 2
  std::uint8_t type;
  std::uint8_t length;
  std::uint8_t bus;  // 0 = ISA
  std::uint8_t source;
  std::uint32_t global_system_interrupt;
  std::uint16_t flags;  // MPS INTI flags: polarity bits 1:0, trigger mode bits 3:2
};
static_assert(sizeof(MadtInterruptOverride) == 10);

}  // namespace minivmm::vmm::acpi
