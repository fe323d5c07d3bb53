// The virtio-mmio windows exec announces in the DSDT (LNRO0005): the resource template's bytes
// as ACPI 6.5 6.4.3 lays them out, and the table that holds them.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "devices/bus/guest_memory.h"
#include "vmm/boot/acpi_tables.h"
#include "vmm/boot/aml.h"

namespace minivmm::vmm {
namespace {

TEST(AcpiVirtio, CrsHoldsTheWindowAndTheInterrupt) {
  const aml::Bytes crs = aml::crs_mmio_irq(0xd0001000, 0x1000, 6);
  // Name(_CRS, Buffer(len) { Memory32Fixed ..., Interrupt ..., EndTag }).
  const std::vector<std::uint8_t> resources{
      0x86, 0x09, 0x00, 0x01, 0x00, 0x10, 0x00, 0xd0, 0x00, 0x10, 0x00, 0x00,  // rw, base, size
      0x89, 0x06, 0x00, 0x03, 0x01, 0x06, 0x00, 0x00, 0x00,                    // edge, high, gsi 6
      0x79, 0x00};
  ASSERT_GE(crs.size(), resources.size());
  EXPECT_TRUE(std::equal(resources.begin(), resources.end(), crs.end() - static_cast<long>(resources.size())));
  EXPECT_EQ(crs[0], 0x08);  // NameOp
  EXPECT_EQ(std::string(crs.begin() + 1, crs.begin() + 5), "_CRS");
}

TEST(AcpiVirtio, DsdtNamesEveryWindowOnlyWhenAsked) {
  std::vector<std::uint8_t> ram(2u << 20);
  devices::GuestMemory mem(std::as_writable_bytes(std::span(ram)));
  AcpiConfig plain;
  const auto a = write_acpi_tables(mem, plain);
  const std::string dsdt_plain(reinterpret_cast<const char*>(ram.data() + a.dsdt_addr), 512);
  EXPECT_EQ(dsdt_plain.find("LNRO0005"), std::string::npos);
  AcpiConfig with;
  with.virtio_mmio = {{0xd0000000, 0x1000, 5}, {0xd0001000, 0x1000, 6}, {0xd0002000, 0x1000, 7}};
  const auto b = write_acpi_tables(mem, with);
  std::uint32_t len = 0;
  std::memcpy(&len, ram.data() + b.dsdt_addr + 4, 4);
  const std::string dsdt(reinterpret_cast<const char*>(ram.data() + b.dsdt_addr), len);
  std::size_t count = 0;
  for (std::size_t at = dsdt.find("LNRO0005"); at != std::string::npos; at = dsdt.find("LNRO0005", at + 1)) ++count;
  EXPECT_EQ(count, 3u);
  EXPECT_NE(dsdt.find("VR02"), std::string::npos);
  std::uint8_t sum = 0;
  for (const char c : dsdt) sum = static_cast<std::uint8_t>(sum + static_cast<std::uint8_t>(c));
  EXPECT_EQ(sum, 0);  // the table still checksums
}

}  // namespace
}  // namespace minivmm::vmm
