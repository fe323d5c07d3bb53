#include "vmm/boot/x86_long_mode.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "tests/unit/vmm/boot/test_ram.h"
#include "vmm/boot/x86_descriptors.h"
#include "vmm/boot/x86_protected_mode.h"

namespace minivmm::vmm {
namespace {

using testing::kMiB;
using testing::TestRam;

TEST(X86LongModeTest, IdentityMapsFourGiBWithTwoMiBPages) {
  TestRam ram(16 * kMiB);
  const X86BootState s = setup_long_mode(ram.mem());
  ASSERT_EQ(s.cr3, 0x9000u);
  EXPECT_EQ(ram.read<std::uint64_t>(0x9000), 0xa000u | 0x3);  // PML4[0] -> PDPT, P|RW
  EXPECT_EQ(ram.read<std::uint64_t>(0x9008), 0u);
  for (std::uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ram.read<std::uint64_t>(0xa000 + i * 8), (0xb000 + i * 0x1000) | 0x3) << i;
  }
  EXPECT_EQ(ram.read<std::uint64_t>(0xa000 + 4 * 8), 0u);
  EXPECT_EQ(ram.read<std::uint64_t>(0xb000), 0x83u);           // 0 -> 0, P|RW|PS
  EXPECT_EQ(ram.read<std::uint64_t>(0xb008), 0x200083u);       // 2 MiB -> 2 MiB
  EXPECT_EQ(ram.read<std::uint64_t>(0xbff8), 0x3fe00083u);     // last 2 MiB of the first GiB
  // The local APIC page at 0xfee00000: PD 3, index (0xfee00000 >> 21) & 511.
  const std::uint64_t lapic_pde = 0xe000 + ((0xfee00000u >> 21) & 511) * 8;
  EXPECT_EQ(ram.read<std::uint64_t>(lapic_pde), 0xfee00000u | 0x83);
  EXPECT_EQ(ram.read<std::uint64_t>(0xeff8), 0xffe00083u);     // top of 4 GiB
}

TEST(X86LongModeTest, GdtHoldsLinuxBootDescriptors) {
  TestRam ram(16 * kMiB);
  const X86BootState s = setup_long_mode(ram.mem());
  ASSERT_EQ(s.gdt.base, 0x1000u);
  ASSERT_EQ(s.gdt.limit, 6 * 8 - 1);
  EXPECT_EQ(ram.read<std::uint64_t>(0x1000), 0u);
  EXPECT_EQ(ram.read<std::uint64_t>(0x1008), 0u);
  EXPECT_EQ(ram.read<std::uint64_t>(0x1010), 0x00af9b000000ffffu);  // 64-bit code, G, L
  EXPECT_EQ(ram.read<std::uint64_t>(0x1018), 0x00cf93000000ffffu);  // data, G, D/B
  EXPECT_EQ(ram.read<std::uint64_t>(0x1020), 0x00008b0010800067u);  // busy TSS at 0x1080
  EXPECT_EQ(ram.read<std::uint64_t>(0x1028), 0u);                   // TSS base[63:32]
  EXPECT_EQ(s.tr.base, 0x1080u);
  EXPECT_EQ(s.tr.limit, 0x67u);
  EXPECT_EQ(s.tr.selector, 0x20);
}

TEST(X86LongModeTest, TssAndStaleTablesAreCleared) {
  TestRam ram(16 * kMiB);
  ram.mem().fill(0x1080, 0x68, std::byte{0xcc});
  ram.mem().fill(0x9000, 0x6000, std::byte{0xcc});
  setup_long_mode(ram.mem());
  EXPECT_EQ(ram.read<std::uint64_t>(0x1080), 0u);
  EXPECT_EQ(ram.read<std::uint64_t>(0x9ff8), 0u);  // PML4[511]
  EXPECT_EQ(ram.read<std::uint64_t>(0xaff8), 0u);  // PDPT[511]
}

TEST(X86ProtectedModeTest, FlatSegmentsPagingOff) {
  TestRam ram(16 * kMiB);
  const X86BootState s = setup_protected_mode(ram.mem());
  EXPECT_EQ(s.cr0, 0x11u);  // PE | ET
  EXPECT_EQ(s.cr4, 0u);
  EXPECT_EQ(s.efer, 0u);
  EXPECT_EQ(s.rflags, 0x2u);
  EXPECT_FALSE(s.cs.l);
  EXPECT_TRUE(s.cs.db);
  EXPECT_EQ(s.cs.limit, 0xffffffffu);
  EXPECT_EQ(s.cs.type, 0xb);
  EXPECT_EQ(s.ss.type, 0x3);
  EXPECT_EQ(s.tr.base, 0u);
  EXPECT_EQ(s.tr.limit, 0x67u);
  EXPECT_EQ(ram.read<std::uint64_t>(0x1010), 0x00cf9b000000ffffu);  // 32-bit code
  EXPECT_EQ(ram.read<std::uint64_t>(0x1018), 0x00cf93000000ffffu);
  EXPECT_EQ(ram.read<std::uint64_t>(0x1020), 0x00008b0000000067u);
}

TEST(X86DescriptorsTest, EncodesByteGranularLimitsWithoutScaling) {
  SegmentState seg = busy_tss_segment(0x12345678);
  EXPECT_EQ(encode_segment_descriptor(seg), 0x12008b3456780067u);
}

}  // namespace
}  // namespace minivmm::vmm
