#include "vmm/boot/acpi_tables.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm {
namespace {

using testing::kMiB;
using testing::TestRam;
using testing::throws_boot_error;

class AcpiTablesTest : public ::testing::Test {
 protected:
  AcpiTables write(std::uint32_t cpus) {
    AcpiConfig config;
    config.num_cpus = cpus;
    return write_acpi_tables(ram_.mem(), config);
  }
  std::string signature(std::uint64_t addr, std::size_t len = 4) const {
    std::string s;
    for (std::size_t i = 0; i < len; ++i) s.push_back(ram_.read<char>(addr + i));
    return s;
  }
  std::uint32_t length(std::uint64_t table) const { return ram_.read<std::uint32_t>(table + 4); }
  unsigned byte_sum(std::uint64_t addr, std::uint64_t len) const {
    unsigned sum = 0;
    for (std::byte b : ram_.bytes(addr, len)) sum += std::to_integer<unsigned>(b);
    return sum & 0xff;
  }

  TestRam ram_{16 * kMiB};
};

TEST_F(AcpiTablesTest, RsdpSitsInTheBiosScanAreaWithValidChecksums) {
  const AcpiTables t = write(1);
  EXPECT_GE(t.rsdp_addr, 0xe0000u);
  EXPECT_LT(t.rsdp_addr + 36, 0x100000u);
  EXPECT_EQ(t.rsdp_addr % 16, 0u);
  EXPECT_EQ(signature(t.rsdp_addr, 8), "RSD PTR ");
  EXPECT_EQ(ram_.read<std::uint8_t>(t.rsdp_addr + 15), 2);          // revision
  EXPECT_EQ(ram_.read<std::uint32_t>(t.rsdp_addr + 16), 0u);        // no RSDT
  EXPECT_EQ(ram_.read<std::uint32_t>(t.rsdp_addr + 20), 36u);       // length
  EXPECT_EQ(ram_.read<std::uint64_t>(t.rsdp_addr + 24), t.xsdt_addr);
  EXPECT_EQ(byte_sum(t.rsdp_addr, 20), 0u);
  EXPECT_EQ(byte_sum(t.rsdp_addr, 36), 0u);
  EXPECT_LE(t.end_addr, 0x100000u);
}

TEST_F(AcpiTablesTest, EverySdtHasASignatureLengthAndZeroChecksum) {
  const AcpiTables t = write(4);
  struct Expect {
    std::uint64_t addr;
    const char* sig;
    std::uint32_t len;
  };
  const Expect tables[] = {
      {t.xsdt_addr, "XSDT", 36 + 2 * 8},
      {t.fadt_addr, "FACP", 276},
      {t.dsdt_addr, "DSDT", 36},
      {t.madt_addr, "APIC", 44 + 4 * 8 + 12 + 2 * 10},
  };
  for (const Expect& e : tables) {
    EXPECT_EQ(signature(e.addr), e.sig);
    EXPECT_EQ(length(e.addr), e.len) << e.sig;
    EXPECT_EQ(byte_sum(e.addr, length(e.addr)), 0u) << e.sig;
    EXPECT_EQ(e.addr % 16, 0u) << e.sig;
  }
  EXPECT_EQ(ram_.read<std::uint64_t>(t.xsdt_addr + 36), t.fadt_addr);
  EXPECT_EQ(ram_.read<std::uint64_t>(t.xsdt_addr + 44), t.madt_addr);
}

TEST_F(AcpiTablesTest, FadtIsFullAcpiWithSciOnIrq9AndPointsAtDsdtAndFacs) {
  const AcpiTables t = write(1);
  const std::uint64_t f = t.fadt_addr;
  EXPECT_EQ(ram_.read<std::uint8_t>(f + 8), 6);                 // revision
  EXPECT_EQ(ram_.read<std::uint32_t>(f + 36), t.facs_addr);     // FIRMWARE_CTRL, as QEMU
  EXPECT_EQ(ram_.read<std::uint32_t>(f + 40), 0u);              // DSDT: use X_ form
  EXPECT_EQ(ram_.read<std::uint16_t>(f + 46), 9);               // SCI_INT
  EXPECT_EQ(ram_.read<std::uint32_t>(f + 48), 0u);              // SMI_CMD: always ACPI mode
  EXPECT_EQ(ram_.read<std::uint32_t>(f + 56), 0u);              // no PM1a event block
  const auto flags = ram_.read<std::uint32_t>(f + 112);
  EXPECT_EQ(flags & (1u << 20), 0u);                            // not HW_REDUCED_ACPI
  EXPECT_NE(flags & 1u, 0u);                                    // WBINVD
  EXPECT_EQ(ram_.read<std::uint16_t>(f + 109), 0x7);            // legacy devs, 8042, no VGA
  EXPECT_EQ(ram_.read<std::uint64_t>(f + 132), 0u);             // X_FIRMWARE_CTRL: must be 0
  EXPECT_NE(flags & (1u << 6), 0u);                             // FIX_RTC: no PM1 block
  EXPECT_EQ(ram_.read<std::uint64_t>(f + 140), t.dsdt_addr);

  EXPECT_EQ(signature(t.facs_addr), "FACS");
  EXPECT_EQ(length(t.facs_addr), 64u);
  EXPECT_EQ(t.facs_addr % 64, 0u);
}

TEST_F(AcpiTablesTest, OptionalPm1BlocksAppearInTheFadt) {
  AcpiConfig config;
  config.pm1a_evt_port = 0x600;
  config.pm1a_cnt_port = 0x604;
  const AcpiTables t = write_acpi_tables(ram_.mem(), config);
  EXPECT_EQ(ram_.read<std::uint32_t>(t.fadt_addr + 56), 0x600u);
  EXPECT_EQ(ram_.read<std::uint32_t>(t.fadt_addr + 64), 0x604u);
  EXPECT_EQ(ram_.read<std::uint8_t>(t.fadt_addr + 88), 4);
  EXPECT_EQ(ram_.read<std::uint8_t>(t.fadt_addr + 89), 2);
  EXPECT_EQ(byte_sum(t.fadt_addr, 276), 0u);
}

// The PM block at QEMU's PM_IO_BASE (devices/pc/acpi_pm.h): each block by its 32-bit port and
// length and by its X_ Generic Address (I/O space, the same port), the 24-bit timer.
TEST_F(AcpiTablesTest, PmBlocksAndTimerAppearInBothFadtForms) {
  AcpiConfig config;
  config.pm1a_evt_port = 0x600;
  config.pm1a_cnt_port = 0x604;
  config.pm_tmr_port = 0x608;
  const AcpiTables t = write_acpi_tables(ram_.mem(), config);
  const std::uint64_t f = t.fadt_addr;
  EXPECT_EQ(byte_sum(f, 276), 0u);
  EXPECT_EQ(ram_.read<std::uint16_t>(f + 46), 9);          // SCI_INT
  EXPECT_EQ(ram_.read<std::uint32_t>(f + 76), 0x608u);     // PM_TMR_BLK
  EXPECT_EQ(ram_.read<std::uint8_t>(f + 91), 4);           // PM_TMR_LEN
  const auto flags = ram_.read<std::uint32_t>(f + 112);
  EXPECT_EQ(flags & (1u << 8), 0u);                        // TMR_VAL_EXT: 24 bits
  EXPECT_EQ(flags & (1u << 6), 0u);                        // FIX_RTC clear: RTC_STS is there
  struct Gas {
    std::uint64_t at;
    std::uint8_t bits;
    std::uint8_t access;
    std::uint64_t port;
  };
  // X_PM1a_EVT_BLK at 148, X_PM1a_CNT_BLK at 172, X_PM_TMR_BLK at 208 (ACPI 6.5 table 5.9).
  for (const Gas& g : {Gas{148, 32, 2, 0x600}, Gas{172, 16, 2, 0x604}, Gas{208, 32, 3, 0x608}}) {
    EXPECT_EQ(ram_.read<std::uint8_t>(f + g.at), 1) << g.at;  // system I/O
    EXPECT_EQ(ram_.read<std::uint8_t>(f + g.at + 1), g.bits) << g.at;
    EXPECT_EQ(ram_.read<std::uint8_t>(f + g.at + 2), 0) << g.at;
    EXPECT_EQ(ram_.read<std::uint8_t>(f + g.at + 3), g.access) << g.at;
    EXPECT_EQ(ram_.read<std::uint64_t>(f + g.at + 4), g.port) << g.at;
  }
  // No PM1b, PM2 or GPE blocks.
  EXPECT_EQ(ram_.read<std::uint32_t>(f + 60), 0u);
  EXPECT_EQ(ram_.read<std::uint32_t>(f + 80), 0u);
}

// The FACS the FADT's FIRMWARE_CTRL points at: 64 bytes, 64-byte aligned, version 2, its
// waking vectors 0 until the guest writes one (the S3 resume reads it then).
TEST_F(AcpiTablesTest, FacsIsEmptyWithItsWakingVectorsForTheGuestToSet) {
  const AcpiTables t = write(1);
  EXPECT_EQ(ram_.read<std::uint32_t>(t.fadt_addr + 36), t.facs_addr);
  EXPECT_EQ(signature(t.facs_addr), "FACS");
  EXPECT_EQ(length(t.facs_addr), 64u);
  EXPECT_EQ(t.facs_addr % 64, 0u);
  EXPECT_LT(t.facs_addr, 0x100000u);
  EXPECT_EQ(ram_.read<std::uint32_t>(t.facs_addr + 12), 0u);  // firmware waking vector
  EXPECT_EQ(ram_.read<std::uint64_t>(t.facs_addr + 24), 0u);  // X_ waking vector
  EXPECT_EQ(ram_.read<std::uint8_t>(t.facs_addr + 32), 2);    // version
}

// With a PM1 control block, the DSDT names the sleep states at the root as QEMU does:
// Name(_S3, Package(4) { One, One, Zero, Zero }), Name(_S5, Package(4) { Zero, Zero, Zero,
// Zero }), before the pvpanic device.
TEST_F(AcpiTablesTest, DsdtNamesS3AndS5WithQemusSleepTypes) {
  AcpiConfig config;
  config.pm1a_evt_port = 0x600;
  config.pm1a_cnt_port = 0x604;
  config.pvpanic_port = 0x505;
  const AcpiTables t = write_acpi_tables(ram_.mem(), config);
  const std::uint32_t len = length(t.dsdt_addr);
  EXPECT_EQ(byte_sum(t.dsdt_addr, len), 0u);
  std::vector<std::uint8_t> aml;
  for (std::byte b : ram_.bytes(t.dsdt_addr + 36, len - 36)) aml.push_back(std::to_integer<std::uint8_t>(b));
  const std::vector<std::uint8_t> want{
      0x08, '_', 'S', '3', '_', 0x12, 0x06, 0x04, 0x01, 0x01, 0x00, 0x00,
      0x08, '_', 'S', '5', '_', 0x12, 0x06, 0x04, 0x00, 0x00, 0x00, 0x00};
  ASSERT_GE(aml.size(), want.size());
  EXPECT_EQ(std::vector<std::uint8_t>(aml.begin(), aml.begin() + 24), want);
  EXPECT_EQ(aml[24], 0x10);  // Scope(\_SB) with pvpanic follows
}

struct MadtEntry {
  std::uint8_t type;
  std::vector<std::byte> bytes;
};

std::vector<MadtEntry> madt_entries(const TestRam& ram, std::uint64_t madt) {
  std::vector<MadtEntry> out;
  const std::uint32_t len = ram.read<std::uint32_t>(madt + 4);
  std::uint64_t pos = madt + 44;
  while (pos < madt + len) {
    const auto type = ram.read<std::uint8_t>(pos);
    const auto elen = ram.read<std::uint8_t>(pos + 1);
    if (elen == 0) break;
    out.push_back({type, ram.bytes(pos, elen)});
    pos += elen;
  }
  return out;
}

std::vector<std::byte> bytes_of(std::initializer_list<unsigned> v) {
  std::vector<std::byte> out;
  for (unsigned b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}

void expect_madt_for(const TestRam& ram, const AcpiTables& t, unsigned cpus) {
  EXPECT_EQ(ram.read<std::uint32_t>(t.madt_addr + 36), 0xfee00000u);  // local APIC address
  EXPECT_EQ(ram.read<std::uint32_t>(t.madt_addr + 40), 1u);           // PCAT_COMPAT
  const auto entries = madt_entries(ram, t.madt_addr);
  ASSERT_EQ(entries.size(), cpus + 3);
  for (unsigned i = 0; i < cpus; ++i) {
    EXPECT_EQ(entries[i].bytes, bytes_of({0, 8, i, i, 1, 0, 0, 0})) << "cpu " << i;
  }
  // IOAPIC: id = cpus, address 0xfec00000, GSI base 0.
  EXPECT_EQ(entries[cpus].bytes,
            bytes_of({1, 12, cpus, 0, 0x00, 0x00, 0xc0, 0xfe, 0, 0, 0, 0}));
  // IRQ0 -> GSI2 edge/high; IRQ9 -> GSI9 level/high.
  EXPECT_EQ(entries[cpus + 1].bytes, bytes_of({2, 10, 0, 0, 2, 0, 0, 0, 0x5, 0}));
  EXPECT_EQ(entries[cpus + 2].bytes, bytes_of({2, 10, 0, 9, 9, 0, 0, 0, 0xd, 0}));
}

TEST_F(AcpiTablesTest, MadtForOneCpu) {
  const AcpiTables t = write(1);
  expect_madt_for(ram_, t, 1);
}

TEST_F(AcpiTablesTest, MadtForFourCpus) {
  const AcpiTables t = write(4);
  expect_madt_for(ram_, t, 4);
  EXPECT_EQ(byte_sum(t.madt_addr, length(t.madt_addr)), 0u);
}

TEST_F(AcpiTablesTest, MaxCpusStillFitTheBiosArea) {
  const AcpiTables t = write(kMaxAcpiCpus);
  EXPECT_LE(t.end_addr, 0x100000u);
  EXPECT_EQ(byte_sum(t.madt_addr, length(t.madt_addr)), 0u);
}

TEST_F(AcpiTablesTest, RejectsBadCpuCountsAndSci) {
  EXPECT_TRUE(throws_boot_error([&] { write(0); }, "num_cpus 0"));
  EXPECT_TRUE(throws_boot_error([&] { write(255); }, "num_cpus 255"));
  AcpiConfig config;
  config.sci_irq = 20;
  EXPECT_TRUE(throws_boot_error([&] { write_acpi_tables(ram_.mem(), config); }, "sci_irq 20"));
}

// The pvpanic device, which Linux finds only in the DSDT (drivers/misc/pvpanic/pvpanic-mmio.c
// binds _HID QEMU0001): Scope(\_SB) { Device(PEVT) { Name(_HID, "QEMU0001"); Name(_CRS,
// ResourceTemplate() { IO(Decode16, 0x505, 0x505, 1, 1) }) } }, byte for byte as iasl
// disassembles it (checked with `iasl -d` on the table, acpica-tools).
TEST_F(AcpiTablesTest, DsdtDescribesPvpanicAtItsPort) {
  AcpiConfig config;
  config.pvpanic_port = 0x505;
  const AcpiTables t = write_acpi_tables(ram_.mem(), config);
  const std::uint32_t len = length(t.dsdt_addr);
  EXPECT_EQ(byte_sum(t.dsdt_addr, len), 0u);
  std::vector<std::uint8_t> aml;
  for (std::byte b : ram_.bytes(t.dsdt_addr + 36, len - 36)) aml.push_back(std::to_integer<std::uint8_t>(b));
  const std::vector<std::uint8_t> want{
      0x10, 0x2f, '\\', '_', 'S', 'B', '_',                  // Scope(\_SB), 47 bytes
      0x5b, 0x82, 0x27, 'P', 'E', 'V', 'T',                  // Device(PEVT), 39 bytes
      0x08, '_', 'H', 'I', 'D', 0x0d, 'Q', 'E', 'M', 'U', '0', '0', '0', '1', 0x00,
      0x08, '_', 'C', 'R', 'S', 0x11, 0x0d, 0x0a, 0x0a,      // Buffer(10)
      0x47, 0x01, 0x05, 0x05, 0x05, 0x05, 0x01, 0x01,        // IO(Decode16, 0x505, ...)
      0x79, 0x00};                                           // EndTag
  EXPECT_EQ(aml, want);
}

TEST_F(AcpiTablesTest, WithoutPvpanicTheDsdtIsJustItsHeader) {
  const AcpiTables t = write(1);
  EXPECT_EQ(length(t.dsdt_addr), 36u);
}

}  // namespace
}  // namespace minivmm::vmm
