#include "vmm/boot/bzimage_loader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/vmm/boot/bzimage_builder.h"
#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm {
namespace {

using testing::BzImageSpec;
using testing::kGiB;
using testing::kMiB;
using testing::make_bzimage;
using testing::make_payload;
using testing::put;
using testing::TestRam;
using testing::throws_boot_error;

constexpr std::uint64_t kZp = 0x7000;  // default zero page

class BzImageLoaderTest : public ::testing::Test {
 protected:
  LoadedKernel load(const std::vector<std::byte>& image, const BzImageOptions& opts = {}) {
    return load_bzimage(ram_.mem(), image, opts);
  }
  std::uint8_t zp8(std::uint64_t off) const { return ram_.read<std::uint8_t>(kZp + off); }
  std::uint16_t zp16(std::uint64_t off) const { return ram_.read<std::uint16_t>(kZp + off); }
  std::uint32_t zp32(std::uint64_t off) const { return ram_.read<std::uint32_t>(kZp + off); }
  std::uint64_t zp64(std::uint64_t off) const { return ram_.read<std::uint64_t>(kZp + off); }

  TestRam ram_{64 * kMiB};
};

TEST_F(BzImageLoaderTest, HappyPathLoadsKernelAndFillsZeroPage) {
  const BzImageSpec spec;
  const auto image = make_bzimage(spec);
  const std::vector<std::byte> initrd = testing::pattern_bytes(10000, 0x55);
  BzImageOptions opts;
  opts.cmdline = "console=ttyS0 panic=-1";
  opts.initrd = initrd;
  const LoadedKernel k = load(image, opts);

  // Relocatable with an aligned pref_address that fits: loaded there, 64-bit entry at +0x200.
  EXPECT_EQ(k.load_addr, 0x1000000u);
  EXPECT_EQ(k.entry_addr, 0x1000200u);
  EXPECT_EQ(k.load_end, 0x1000000u + spec.init_size);
  EXPECT_EQ(k.protocol_version, 0x020f);
  EXPECT_EQ(k.boot_info_addr, kZp);
  EXPECT_EQ(k.cmdline_addr, 0x20000u);
  EXPECT_EQ(ram_.bytes(0x1000000, spec.payload_size), make_payload(spec));

  // Header copied from the image (fields the loader does not own keep their values)...
  EXPECT_EQ(zp8(0x1f1), 4);
  EXPECT_EQ(zp32(0x1f4), spec.payload_size / 16);
  EXPECT_EQ(zp16(0x1fa), 0xffff);
  EXPECT_EQ(zp16(0x1fe), 0xaa55);
  EXPECT_EQ(zp32(0x202), 0x53726448u);
  EXPECT_EQ(zp16(0x206), 0x020f);
  EXPECT_EQ(zp16(0x20e), 0x1234);
  EXPECT_EQ(zp32(0x238), spec.cmdline_size);
  EXPECT_EQ(zp64(0x258), spec.pref_address);
  EXPECT_EQ(zp32(0x260), spec.init_size);
  EXPECT_EQ(zp32(0x264), 0x190u);
  // ...but only up to 0x202 + the length byte at 0x201.
  EXPECT_EQ(zp32(0x268), 0u);
  // ...and the loader's own fields set.
  EXPECT_EQ(zp8(0x210), 0xff);                // type_of_loader: undefined
  EXPECT_EQ(zp8(0x211), 0x01 | 0x80);         // LOADED_HIGH | CAN_USE_HEAP
  EXPECT_EQ(zp16(0x224), 0xfe00);             // heap_end_ptr
  EXPECT_EQ(zp32(0x214), 0x1000000u);         // code32_start follows the load address
  EXPECT_EQ(zp32(0x228), 0x20000u);           // cmd_line_ptr
  EXPECT_EQ(zp32(0x23c), 0u);                 // hardware_subarch PC
  EXPECT_EQ(zp8(0x1ef), 0);                   // sentinel
  EXPECT_EQ(zp64(0x070), 0u);                 // no RSDP asked for

  const std::string expected_cmdline = "console=ttyS0 panic=-1";
  for (std::size_t i = 0; i < expected_cmdline.size(); ++i) {
    EXPECT_EQ(ram_.read<char>(0x20000 + i), expected_cmdline[i]) << i;
  }
  EXPECT_EQ(ram_.read<char>(0x20000 + expected_cmdline.size()), '\0');

  // Initrd: page-aligned, as high as RAM allows.
  const std::uint64_t initrd_addr = (64 * kMiB - 10000) & ~0xfffull;
  EXPECT_EQ(zp32(0x218), initrd_addr);
  EXPECT_EQ(zp32(0x21c), 10000u);
  EXPECT_EQ(k.initrd_addr, initrd_addr);
  EXPECT_EQ(k.initrd_size, 10000u);
  EXPECT_EQ(ram_.bytes(initrd_addr, initrd.size()), initrd);

  // e820: low RAM, the EBDA/VGA/BIOS hole, RAM from 1 MiB to the end.
  ASSERT_EQ(zp8(0x1e8), 3);
  struct Entry {
    std::uint64_t addr, size;
    std::uint32_t type;
  };
  const Entry expected[] = {
      {0, 0x9fc00, 1}, {0x9fc00, 0x100000 - 0x9fc00, 2}, {0x100000, 63 * kMiB, 1}};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::uint64_t e = 0x2d0 + i * 20;
    EXPECT_EQ(zp64(e), expected[i].addr) << i;
    EXPECT_EQ(zp64(e + 8), expected[i].size) << i;
    EXPECT_EQ(zp32(e + 16), expected[i].type) << i;
  }
  EXPECT_EQ(zp64(0x2d0 + 3 * 20), 0u);
}

TEST_F(BzImageLoaderTest, BootStateFollowsThe64BitBootProtocol) {
  const LoadedKernel k = load(make_bzimage({}));
  const X86BootState& s = k.boot_state;
  EXPECT_EQ(s.rip, 0x1000200u);
  EXPECT_EQ(s.rsi, kZp);
  EXPECT_EQ(s.rsp, 0x8ff0u);
  EXPECT_EQ(s.rflags, 0x2u);
  EXPECT_EQ(s.cr0, 0x80000031u);  // PG | NE | ET | PE
  EXPECT_EQ(s.cr3, 0x9000u);
  EXPECT_EQ(s.cr4, 0x20u);        // PAE
  EXPECT_EQ(s.efer, 0x500u);      // LMA | LME
  EXPECT_EQ(s.cs.selector, 0x10);  // __BOOT_CS
  EXPECT_TRUE(s.cs.l);
  EXPECT_FALSE(s.cs.db);
  EXPECT_EQ(s.cs.type, 0xb);
  for (const SegmentState* seg : {&s.ds, &s.es, &s.fs, &s.gs, &s.ss}) {
    EXPECT_EQ(seg->selector, 0x18);  // __BOOT_DS
    EXPECT_EQ(seg->type, 0x3);
    EXPECT_EQ(seg->limit, 0xffffffffu);
    EXPECT_TRUE(seg->g);
    EXPECT_TRUE(seg->db);
  }
  EXPECT_EQ(s.tr.type, 0xb);
  EXPECT_FALSE(s.tr.s);
  EXPECT_TRUE(s.tr.present);
  EXPECT_FALSE(s.ldt.present);
  EXPECT_EQ(s.gdt.base, 0x1000u);
  EXPECT_EQ(s.gdt.limit, 0x2f);
  EXPECT_EQ(s.idt.base, 0u);
  EXPECT_EQ(s.idt.limit, 0);
}

TEST_F(BzImageLoaderTest, RsdpAddressIsPassedToProtocol214Kernels) {
  BzImageOptions opts;
  opts.acpi_rsdp_addr = 0xe0000;
  load(make_bzimage({}), opts);
  EXPECT_EQ(zp64(0x070), 0xe0000u);
}

TEST_F(BzImageLoaderTest, RsdpAddressIsNotWrittenForOlderProtocols) {
  BzImageSpec spec;
  spec.version = 0x020c;
  BzImageOptions opts;
  opts.acpi_rsdp_addr = 0xe0000;
  load(make_bzimage(spec), opts);
  EXPECT_EQ(zp64(0x070), 0u);
}

TEST_F(BzImageLoaderTest, SetupSectsZeroMeansFour) {
  BzImageSpec spec;
  spec.setup_sects = 0;
  const LoadedKernel k = load(make_bzimage(spec));
  EXPECT_EQ(ram_.bytes(k.load_addr, spec.payload_size), make_payload(spec));
}

TEST_F(BzImageLoaderTest, MisalignedPrefAddressFallsBackToOneMiB) {
  BzImageSpec spec;
  spec.pref_address = 0x1100000;  // not 2 MiB aligned
  const LoadedKernel k = load(make_bzimage(spec));
  EXPECT_EQ(k.load_addr, 0x100000u);
  EXPECT_EQ(k.entry_addr, 0x100200u);
  // The kernel still decompresses at align_up(max(load, pref), kernel_alignment).
  EXPECT_EQ(k.load_end, 0x1200000u + spec.init_size);
  EXPECT_EQ(ram_.bytes(0x100000, spec.payload_size), make_payload(spec));
}

TEST_F(BzImageLoaderTest, NonRelocatableKernelLoadsAtOneMiB) {
  BzImageSpec spec;
  spec.relocatable = 0;
  const LoadedKernel k = load(make_bzimage(spec));
  EXPECT_EQ(k.load_addr, 0x100000u);
  EXPECT_EQ(k.entry_addr, 0x100200u);
  EXPECT_EQ(k.boot_state.rip, 0x100200u);
  EXPECT_EQ(k.load_end, spec.pref_address + spec.init_size);  // it moves itself to pref_address
  EXPECT_EQ(zp32(0x214), 0x100000u);
}

TEST_F(BzImageLoaderTest, NonRelocatableKernelWithOtherCode32StartIsRejected) {
  BzImageSpec spec;
  spec.relocatable = 0;
  spec.code32_start = 0x200000;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "code32_start 0x200000"));
}

TEST_F(BzImageLoaderTest, InitrdStaysBelowInitrdAddrMax) {
  TestRam big(2 * kGiB);
  BzImageSpec spec;
  spec.initrd_addr_max = 0x37ffffff;
  const std::vector<std::byte> initrd = testing::pattern_bytes(10000, 0x77);
  BzImageOptions opts;
  opts.initrd = initrd;
  const LoadedKernel k = load_bzimage(big.mem(), make_bzimage(spec), opts);
  EXPECT_EQ(k.initrd_addr % 0x1000, 0u);
  EXPECT_LE(k.initrd_addr + initrd.size(), 0x38000000u);
  EXPECT_EQ(k.initrd_addr, (0x38000000u - 10000) & ~0xfffull);
  EXPECT_EQ(big.read<std::uint32_t>(kZp + 0x218), k.initrd_addr);
  EXPECT_EQ(big.bytes(k.initrd_addr, initrd.size()), initrd);
}

TEST_F(BzImageLoaderTest, InitrdLargerThanRamIsRejected) {
  const std::vector<std::byte> initrd(65 * kMiB);
  BzImageOptions opts;
  opts.initrd = initrd;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage({}), opts); }, "initrd of 0x4100000"));
}

TEST_F(BzImageLoaderTest, InitrdMayNotOverlapTheKernelInitArea) {
  // The kernel's init_size area ends at 16 + 8 = 24 MiB of 64: exactly 40 MiB fit above it.
  std::vector<std::byte> initrd(40 * kMiB);
  BzImageOptions opts;
  opts.initrd = initrd;
  EXPECT_EQ(load(make_bzimage({}), opts).initrd_addr, 24 * kMiB);
  initrd.resize(40 * kMiB + 1);
  opts.initrd = initrd;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage({}), opts); },
                                "does not fit between 0x1800000 and 0x4000000"));
}

TEST_F(BzImageLoaderTest, EmptyImageIsRejected) {
  EXPECT_TRUE(throws_boot_error([&] { load({}); }, "too small"));
}

TEST_F(BzImageLoaderTest, ImageSmallerThanItsSetupIsRejected) {
  auto image = make_bzimage({});
  image.resize(0x300);
  EXPECT_TRUE(throws_boot_error([&] { load(image); }, "setup_sects 4"));
}

TEST_F(BzImageLoaderTest, TruncatedPayloadIsRejected) {
  auto image = make_bzimage({});
  image.resize(image.size() - 16);
  EXPECT_TRUE(throws_boot_error([&] { load(image); }, "syssize"));
}

TEST_F(BzImageLoaderTest, WrongBootFlagIsRejected) {
  BzImageSpec spec;
  spec.boot_flag = 0x1234;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "boot_flag is 0x1234"));
}

TEST_F(BzImageLoaderTest, MissingHdrSIsRejected) {
  BzImageSpec spec;
  spec.header_magic = 0;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "HdrS"));
}

TEST_F(BzImageLoaderTest, OldProtocolIsRejected) {
  BzImageSpec spec;
  spec.version = 0x0209;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "0x209 (2.9) is too old"));
}

TEST_F(BzImageLoaderTest, KernelWithout64BitEntryIsRejected) {
  BzImageSpec spec;
  spec.xloadflags = 0x2;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "XLF_KERNEL_64"));
}

TEST_F(BzImageLoaderTest, LowLoadedKernelIsRejected) {
  BzImageSpec spec;
  spec.loadflags = 0;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "LOADED_HIGH"));
}

TEST_F(BzImageLoaderTest, HugeSetupSectsIsRejected) {
  auto image = make_bzimage({});
  put<std::uint8_t>(image, 0x1f1, 200);
  EXPECT_TRUE(throws_boot_error([&] { load(image); }, "setup_sects 200"));
}

TEST_F(BzImageLoaderTest, KernelAlignmentMustBeAPowerOfTwo) {
  BzImageSpec spec;
  spec.kernel_alignment = 0x300000;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "kernel_alignment 0x300000"));
}

TEST_F(BzImageLoaderTest, CommandLineLongerThanCmdlineSizeIsRejected) {
  BzImageSpec spec;
  spec.cmdline_size = 16;
  BzImageOptions opts;
  opts.cmdline = "0123456789abcdefX";  // 17 bytes
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec), opts); }, "cmdline_size of 16"));
  opts.cmdline = "0123456789abcdef";  // exactly cmdline_size is fine
  EXPECT_NO_THROW(load(make_bzimage(spec), opts));
}

TEST_F(BzImageLoaderTest, CommandLineWithNulIsRejected) {
  BzImageOptions opts;
  const std::string with_nul("a\0b", 3);
  opts.cmdline = with_nul;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage({}), opts); }, "NUL"));
}

TEST_F(BzImageLoaderTest, RamTooSmallForInitSizeIsRejected) {
  BzImageSpec spec;
  spec.init_size = 0x3000000;  // 16 MiB + 48 MiB == 64 MiB: fits exactly
  EXPECT_NO_THROW(load(make_bzimage(spec)));
  spec.init_size = 0x3001000;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage(spec)); }, "init_size 0x3001000"));
}

TEST_F(BzImageLoaderTest, RamAbove3GiBIsRejected) {
  TestRam big(3 * kGiB + 0x1000);
  EXPECT_TRUE(throws_boot_error([&] { load_bzimage(big.mem(), make_bzimage({}), {}); },
                                "exceeds the supported maximum"));
}

TEST_F(BzImageLoaderTest, ZeroPageOnThePageTablesIsRejected) {
  BzImageOptions opts;
  opts.zero_page_addr = 0x9000;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage({}), opts); },
                                "overlaps the boot page tables"));
}

TEST_F(BzImageLoaderTest, CommandLineOverlappingZeroPageIsRejected) {
  BzImageOptions opts;
  opts.cmdline_addr = 0x7800;
  EXPECT_TRUE(throws_boot_error([&] { load(make_bzimage({}), opts); }, "overlaps"));
}

}  // namespace
}  // namespace minivmm::vmm
