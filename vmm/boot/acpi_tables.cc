#include "vmm/boot/acpi_tables.h"

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "vmm/boot/acpi_structs.h"
#include "vmm/boot/aml.h"
#include "vmm/boot/boot_error.h"
#include "vmm/boot/boot_layout.h"
#include "vmm/boot/boot_placement.h"

namespace minivmm::vmm {
namespace {

using acpi::Facs;
using acpi::Fadt;
using acpi::MadtHeader;
using acpi::MadtInterruptOverride;
using acpi::MadtIoApic;
using acpi::MadtLocalApic;
using acpi::Rsdp;
using acpi::SdtHeader;

constexpr std::uint64_t kRsdpAddr = kBiosAreaStart;  // 16-byte aligned, as the scan requires
constexpr std::uint64_t kTableAlign = 16;
constexpr std::uint64_t kFacsAlign = 64;  // ACPI 5.2.10: "64-byte aligned"

constexpr std::uint8_t kRsdpRevision = 2;
constexpr std::uint8_t kXsdtRevision = 1;
constexpr std::uint8_t kFadtRevision = 6;  // ACPI 6.0 layout, 276 bytes
constexpr std::uint8_t kFadtMinorRevision = 0;
constexpr std::uint8_t kDsdtRevision = 2;  // 64-bit AML integers
constexpr std::uint8_t kMadtRevision = 5;
constexpr std::uint8_t kFacsVersion = 2;

// FADT Fixed Feature Flags (ACPI 6.5 table 5.10). Deliberately NOT HW_REDUCED_ACPI (bit 20):
// Firecracker and QEMU microvm declare hardware-reduced ACPI, but on x86 Linux then installs
// the null legacy PIC and skips PIT timer setup (acpi_generic_reduced_hw_init), while this VMM
// routes its own i8254 PIT through the 8259/IOAPIC. A full-ACPI FADT with SMI_CMD = 0 tells
// ACPICA the platform is always in ACPI mode, so no SMM handshake is attempted.
constexpr std::uint32_t kFadtWbinvd = 1u << 0;
constexpr std::uint32_t kFadtProcC1 = 1u << 2;
constexpr std::uint32_t kFadtPwrButton = 1u << 4;  // 1 = no fixed-feature power button
constexpr std::uint32_t kFadtSlpButton = 1u << 5;  // 1 = no fixed-feature sleep button
constexpr std::uint32_t kFadtFixRtc = 1u << 6;     // 1 = no RTC wake status in PM1 registers

// The sleep states' SLP_TYP values, as QEMU's PIIX4 PM decodes them (devices/pc/acpi_pm.h).
constexpr std::uint8_t kSlpTypS3 = 1;
constexpr std::uint8_t kSlpTypS5 = 0;
constexpr std::uint8_t kGasSystemIo = 1;  // Generic Address Structure: I/O space
constexpr std::uint8_t kGasWordAccess = 2;
constexpr std::uint8_t kGasDwordAccess = 3;

// IA-PC boot architecture flags (ACPI 6.5 table 5.11): the VMM emulates ISA devices (UART,
// PIT, RTC) and an i8042 (Linux only probes the 8042 when this bit is set), and no VGA.
constexpr std::uint16_t kIapcLegacyDevices = 1u << 0;
constexpr std::uint16_t kIapc8042 = 1u << 1;
constexpr std::uint16_t kIapcVgaNotPresent = 1u << 2;

constexpr std::uint32_t kMadtPcatCompat = 1u << 0;  // dual 8259s present: Linux masks them
constexpr std::uint32_t kMadtLapicEnabled = 1u << 0;
constexpr std::uint8_t kMadtTypeLocalApic = 0;
constexpr std::uint8_t kMadtTypeIoApic = 1;
constexpr std::uint8_t kMadtTypeInterruptOverride = 2;
// MPS INTI flags: polarity 01 = active high, trigger 01 = edge / 11 = level.
constexpr std::uint16_t kIntiEdgeActiveHigh = 0x5;
constexpr std::uint16_t kIntiLevelActiveHigh = 0xd;
constexpr std::uint8_t kIsaTimerIrq = 0;
constexpr std::uint32_t kIoApicTimerGsi = 2;  // the 8254 is wired to IOAPIC pin 2 on PCs

constexpr char kOemId[6] = {'M', 'N', 'V', 'M', 'M', ' '};
constexpr char kOemTableId[8] = {'M', 'I', 'N', 'I', 'V', 'M', 'M', ' '};
constexpr char kCreatorId[4] = {'M', 'V', 'M', 'M'};

std::uint8_t checksum_of(const std::byte* data, std::size_t len) {
  const auto sum = std::accumulate(data, data + len, 0u, [](unsigned acc, std::byte b) {
    return acc + std::to_integer<unsigned>(b);
  });
  return static_cast<std::uint8_t>(0x100 - (sum & 0xff));
}

SdtHeader make_header(const char (&signature)[5], std::uint32_t length, std::uint8_t revision) {
  SdtHeader h{};
  std::memcpy(h.signature, signature, 4);
  h.length = length;
  h.revision = revision;
  std::memcpy(h.oem_id, kOemId, sizeof h.oem_id);
  std::memcpy(h.oem_table_id, kOemTableId, sizeof h.oem_table_id);
  h.oem_revision = 1;
  std::memcpy(h.creator_id, kCreatorId, sizeof h.creator_id);
  h.creator_revision = 1;
  return h;
}

template <typename T>
void append(std::vector<std::byte>& out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), p, p + sizeof value);
}

// Fills in the header checksum of a finished table (every byte, checksum included, sums to 0).
void seal(std::vector<std::byte>& table) {
  constexpr std::size_t kChecksumOffset = offsetof(SdtHeader, checksum);
  table[kChecksumOffset] = std::byte{0};
  table[kChecksumOffset] = std::byte{checksum_of(table.data(), table.size())};
}

// Linux enumerates the legacy ISA devices (UART, PIT, RTC, i8042) without AML. What it finds
// only here is the pvpanic device: QEMU's _HID and its one port (devices/pc/pvpanic.h, at its
// slot in vmm/machine/pc_board.cc), as QEMU's hw/misc/pvpanic-isa.c describes it.
// With a PM1 control block, the sleep states it decodes: _S3 (suspend to RAM) and _S5 (soft
// off) as QEMU's hw/i386/acpi-build.c names them, {PM1a SLP_TYP, PM1b SLP_TYP, 0, 0}.
std::vector<std::byte> build_dsdt(const AcpiConfig& config) {
  aml::Bytes code;
  if (config.pm1a_cnt_port != 0) {
    const aml::Bytes s3 = aml::name_byte_package("_S3_", {kSlpTypS3, kSlpTypS3, 0, 0});
    const aml::Bytes s5 = aml::name_byte_package("_S5_", {kSlpTypS5, kSlpTypS5, 0, 0});
    code.insert(code.end(), s3.begin(), s3.end());
    code.insert(code.end(), s5.begin(), s5.end());
  }
  if (config.pvpanic_port) {
    aml::Bytes body = aml::name_string("_HID", "QEMU0001");
    const aml::Bytes crs = aml::crs_io_ports(*config.pvpanic_port, 1);
    body.insert(body.end(), crs.begin(), crs.end());
    const aml::Bytes sb = aml::scope("\\_SB_", aml::device("PEVT", body));
    code.insert(code.end(), sb.begin(), sb.end());
  }
  // virtio-mmio as QEMU's microvm machine describes it (hw/i386/acpi-microvm.c): one device
  // per window, _HID LNRO0005, its own _UID.
  for (std::size_t i = 0; i < config.virtio_mmio.size() && i < 100; ++i) {
    const AcpiMmioDevice& d = config.virtio_mmio[i];
    aml::Bytes body = aml::name_string("_HID", "LNRO0005");
    const aml::Bytes uid = aml::name_uid(static_cast<std::uint8_t>(i));
    const aml::Bytes crs = aml::crs_mmio_irq(d.base, d.size, d.gsi);
    body.insert(body.end(), uid.begin(), uid.end());
    body.insert(body.end(), crs.begin(), crs.end());
    const std::string name = "VR" + std::string(1, char('0' + i / 10)) + char('0' + i % 10);
    const aml::Bytes sb = aml::scope("\\_SB_", aml::device(name, body));
    code.insert(code.end(), sb.begin(), sb.end());
  }
  std::vector<std::byte> t;
  append(t, make_header("DSDT", static_cast<std::uint32_t>(sizeof(SdtHeader) + code.size()),
                        kDsdtRevision));
  for (std::uint8_t b : code) t.push_back(std::byte{b});
  seal(t);
  return t;
}

std::vector<std::byte> build_facs() {
  Facs facs{};
  std::memcpy(facs.signature, "FACS", 4);
  facs.length = sizeof facs;
  facs.version = kFacsVersion;
  std::vector<std::byte> t;
  append(t, facs);
  return t;
}

std::vector<std::byte> build_fadt(const AcpiConfig& config, std::uint64_t dsdt,
                                  std::uint64_t facs) {
  Fadt fadt{};
  fadt.header = make_header("FACP", sizeof fadt, kFadtRevision);
  fadt.fadt_minor_version = kFadtMinorRevision;
  // The DSDT by its 64-bit pointer only (ACPI 6.5 5.2.9: DSDT must then be ignored). The FACS
  // by its 32-bit one, as QEMU does: X_FIRMWARE_CTRL "must be zero" when FIRMWARE_CTRL is not,
  // and kvm-unit-tests' lib/acpi.c (the s3 test) reads only FIRMWARE_CTRL. The tables live
  // below 1 MiB, so it fits.
  fadt.x_dsdt = dsdt;
  fadt.firmware_ctrl = static_cast<std::uint32_t>(facs);
  fadt.sci_int = config.sci_irq;
  fadt.smi_cmd = 0;
  // Each block by its 32-bit port and by its X_ Generic Address (the revision-6 layout has
  // them; ACPICA prefers the X_ form and warns when the two disagree, so they are the same).
  const auto io_gas = [](std::uint16_t port, std::uint8_t bytes, std::uint8_t access) {
    return acpi::Gas{kGasSystemIo, static_cast<std::uint8_t>(8 * bytes), 0, access, port};
  };
  if (config.pm1a_evt_port != 0) {
    fadt.pm1a_evt_blk = config.pm1a_evt_port;
    fadt.pm1_evt_len = 4;
    fadt.x_pm1a_evt_blk = io_gas(config.pm1a_evt_port, 4, kGasWordAccess);
  }
  if (config.pm1a_cnt_port != 0) {
    fadt.pm1a_cnt_blk = config.pm1a_cnt_port;
    fadt.pm1_cnt_len = 2;
    fadt.x_pm1a_cnt_blk = io_gas(config.pm1a_cnt_port, 2, kGasWordAccess);
  }
  if (config.pm_tmr_port != 0) {
    // A 24-bit timer: TMR_VAL_EXT (flag bit 8) stays clear.
    fadt.pm_tmr_blk = config.pm_tmr_port;
    fadt.pm_tmr_len = 4;
    fadt.x_pm_tmr_blk = io_gas(config.pm_tmr_port, 4, kGasDwordAccess);
  }
  fadt.iapc_boot_arch = kIapcLegacyDevices | kIapc8042 | kIapcVgaNotPresent;
  fadt.flags = kFadtWbinvd | kFadtProcC1 | kFadtPwrButton | kFadtSlpButton;
  // With a PM1 event block, RTC_STS/RTC_EN are there (the RTC alarm wakes from S3).
  if (config.pm1a_evt_port == 0) fadt.flags |= kFadtFixRtc;
  std::vector<std::byte> t;
  append(t, fadt);
  seal(t);
  return t;
}

std::vector<std::byte> build_madt(const AcpiConfig& config) {
  std::vector<std::byte> t;
  append(t, MadtHeader{make_header("APIC", 0, kMadtRevision),
                       static_cast<std::uint32_t>(kLocalApicAddr), kMadtPcatCompat});
  for (std::uint32_t cpu = 0; cpu < config.num_cpus; ++cpu) {
    const auto id = static_cast<std::uint8_t>(cpu);
    append(t, MadtLocalApic{kMadtTypeLocalApic, sizeof(MadtLocalApic), id, id,
                            kMadtLapicEnabled});
  }
  append(t, MadtIoApic{kMadtTypeIoApic, sizeof(MadtIoApic),
                       static_cast<std::uint8_t>(config.num_cpus), 0,
                       static_cast<std::uint32_t>(kIoApicAddr), 0});
  append(t, MadtInterruptOverride{kMadtTypeInterruptOverride, sizeof(MadtInterruptOverride), 0,
                                  kIsaTimerIrq, kIoApicTimerGsi, kIntiEdgeActiveHigh});
  // The SCI is level-triggered active-high on the PC (PIIX4), unlike plain ISA edge IRQs.
  append(t, MadtInterruptOverride{kMadtTypeInterruptOverride, sizeof(MadtInterruptOverride), 0,
                                  config.sci_irq, config.sci_irq, kIntiLevelActiveHigh});
  const auto length = static_cast<std::uint32_t>(t.size());
  std::memcpy(t.data() + offsetof(SdtHeader, length), &length, sizeof length);
  seal(t);
  return t;
}

std::vector<std::byte> build_xsdt(const std::vector<std::uint64_t>& entries) {
  std::vector<std::byte> t;
  append(t, make_header("XSDT",
                        static_cast<std::uint32_t>(sizeof(SdtHeader) + 8 * entries.size()),
                        kXsdtRevision));
  for (std::uint64_t e : entries) append(t, e);
  seal(t);
  return t;
}

std::vector<std::byte> build_rsdp(std::uint64_t xsdt) {
  Rsdp rsdp{};
  std::memcpy(rsdp.signature, "RSD PTR ", 8);
  std::memcpy(rsdp.oem_id, kOemId, sizeof rsdp.oem_id);
  rsdp.revision = kRsdpRevision;
  rsdp.length = sizeof rsdp;
  rsdp.xsdt_address = xsdt;
  std::vector<std::byte> t;
  append(t, rsdp);
  t[offsetof(Rsdp, checksum)] = std::byte{checksum_of(t.data(), 20)};
  t[offsetof(Rsdp, extended_checksum)] = std::byte{checksum_of(t.data(), t.size())};
  return t;
}

// Hands out addresses in the BIOS area, refusing to run past its end.
class BiosAreaCursor {
 public:
  explicit BiosAreaCursor(std::uint64_t start) : next_(start) {}
  std::uint64_t take(std::uint64_t size, std::uint64_t alignment) {
    const std::uint64_t addr = align_up(next_, alignment);
    if (addr + size > kBiosAreaEnd) {
      throw BootError("ACPI tables overflow the BIOS area: " + to_hex(size) + " bytes at " +
                      to_hex(addr) + " pass " + to_hex(kBiosAreaEnd));
    }
    next_ = addr + size;
    return addr;
  }
  std::uint64_t next() const { return next_; }

 private:
  std::uint64_t next_;
};

}  // namespace

AcpiTables write_acpi_tables(const devices::GuestMemory& mem, const AcpiConfig& config) {
  if (config.num_cpus == 0 || config.num_cpus > kMaxAcpiCpus) {
    throw BootError("ACPI num_cpus " + std::to_string(config.num_cpus) +
                    " must be between 1 and " + std::to_string(kMaxAcpiCpus));
  }
  if (config.sci_irq >= 16) {
    throw BootError("ACPI sci_irq " + std::to_string(config.sci_irq) +
                    " is not an ISA IRQ (0-15)");
  }

  // Sizes are known up front, so lay the tables out first and build pointers into them.
  const auto dsdt = build_dsdt(config);
  const auto facs = build_facs();
  const auto madt = build_madt(config);
  constexpr std::size_t kXsdtEntries = 2;  // FADT, MADT

  AcpiTables at;
  BiosAreaCursor cursor(kRsdpAddr);
  at.rsdp_addr = cursor.take(sizeof(Rsdp), kTableAlign);
  at.xsdt_addr = cursor.take(sizeof(SdtHeader) + 8 * kXsdtEntries, kTableAlign);
  at.fadt_addr = cursor.take(sizeof(Fadt), kTableAlign);
  at.facs_addr = cursor.take(facs.size(), kFacsAlign);
  at.dsdt_addr = cursor.take(dsdt.size(), kTableAlign);
  at.madt_addr = cursor.take(madt.size(), kTableAlign);
  at.end_addr = cursor.next();

  mem.fill(kRsdpAddr, at.end_addr - kRsdpAddr, std::byte{0});
  mem.store(at.rsdp_addr, build_rsdp(at.xsdt_addr));
  mem.store(at.xsdt_addr, build_xsdt({at.fadt_addr, at.madt_addr}));
  mem.store(at.fadt_addr, build_fadt(config, at.dsdt_addr, at.facs_addr));
  mem.store(at.facs_addr, facs);
  mem.store(at.dsdt_addr, dsdt);
  mem.store(at.madt_addr, madt);
  return at;
}

}  // namespace minivmm::vmm
