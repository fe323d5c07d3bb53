#include "vmm/boot/multiboot_loader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/unit/vmm/boot/elf_builder.h"
#include "tests/unit/vmm/boot/test_ram.h"

namespace minivmm::vmm {
namespace {

using testing::ElfSpec;
using testing::kMiB;
using testing::make_elf;
using testing::pattern_bytes;
using testing::put;
using testing::TestRam;
using testing::throws_boot_error;

constexpr std::uint64_t kText = 0x400000;  // where kvm-unit-tests links its tests
constexpr std::uint64_t kBss = 0x410000;

std::vector<std::byte> text_with_header(std::uint32_t flags, std::size_t header_offset = 0,
                                        std::uint32_t checksum_delta = 0) {
  auto text = pattern_bytes(std::max<std::size_t>(0x1000, header_offset + 12), 9);
  put<std::uint32_t>(text, header_offset, 0x1badb002);
  put<std::uint32_t>(text, header_offset + 4, flags);
  put<std::uint32_t>(text, header_offset + 8, 0u - 0x1badb002u - flags + checksum_delta);
  return text;
}

ElfSpec unit_test_spec(std::uint32_t flags = 0x3) {
  ElfSpec spec;
  spec.is64 = false;
  spec.machine = 3;  // EM_386
  spec.entry = kText + 0x20;
  spec.segments = {{1, kText, text_with_header(flags), 0, 0x1000},
                   {1, kBss, pattern_bytes(0x100, 4), 0x5000, 0x1000}};
  return spec;
}

class MultibootLoaderTest : public ::testing::Test {
 protected:
  LoadedKernel load(const std::vector<std::byte>& image, const MultibootOptions& opts = {}) {
    return load_multiboot_kernel(ram_.mem(), image, opts);
  }
  std::uint32_t info32(std::uint64_t off) const { return ram_.read<std::uint32_t>(0x6000 + off); }
  TestRam ram_{64 * kMiB};
};

TEST_F(MultibootLoaderTest, LoadsSegmentsAndBuildsTheInfoBlock) {
  ram_.mem().fill(kBss + 0x100, 0x4f00, std::byte{0xcc});
  const std::vector<std::byte> initrd = pattern_bytes(3000, 0x21);
  MultibootOptions opts;
  opts.cmdline = "testname=smptest";
  opts.initrd = initrd;
  const LoadedKernel k = load(make_elf(unit_test_spec()), opts);

  EXPECT_EQ(ram_.bytes(kText, 0x1000), text_with_header(0x3));
  EXPECT_EQ(ram_.bytes(kBss, 0x100), pattern_bytes(0x100, 4));
  EXPECT_EQ(ram_.bytes(kBss + 0x100, 0x4f00), std::vector<std::byte>(0x4f00));
  EXPECT_EQ(k.load_addr, kText);
  EXPECT_EQ(k.load_end, kBss + 0x5000);

  EXPECT_EQ(info32(0), (1u << 0) | (1u << 2) | (1u << 3) | (1u << 6) | (1u << 9));
  EXPECT_EQ(info32(4), 639u);                        // mem_lower KiB
  EXPECT_EQ(info32(8), (64 * kMiB - kMiB) / 1024);   // mem_upper KiB
  EXPECT_EQ(info32(16), 0x20000u);
  const std::string cmdline = "testname=smptest";
  for (std::size_t i = 0; i <= cmdline.size(); ++i) {
    EXPECT_EQ(ram_.read<char>(0x20000 + i), i < cmdline.size() ? cmdline[i] : '\0');
  }

  // One module, page-aligned right after the image.
  ASSERT_EQ(info32(20), 1u);
  const std::uint64_t mods = info32(24);
  const std::uint64_t initrd_addr = kBss + 0x5000;  // already page aligned
  EXPECT_EQ(ram_.read<std::uint32_t>(mods + 0), initrd_addr);
  EXPECT_EQ(ram_.read<std::uint32_t>(mods + 4), initrd_addr + 3000);
  EXPECT_EQ(ram_.read<char>(ram_.read<std::uint32_t>(mods + 8)), '\0');
  EXPECT_EQ(ram_.bytes(initrd_addr, 3000), initrd);
  EXPECT_EQ(k.initrd_addr, initrd_addr);

  // mmap: three entries of 24 bytes, size field 20.
  ASSERT_EQ(info32(44), 72u);
  const std::uint64_t mmap = info32(48);
  EXPECT_EQ(ram_.read<std::uint32_t>(mmap), 20u);
  EXPECT_EQ(ram_.read<std::uint64_t>(mmap + 4), 0u);
  EXPECT_EQ(ram_.read<std::uint64_t>(mmap + 12), 0x9fc00u);
  EXPECT_EQ(ram_.read<std::uint32_t>(mmap + 20), 1u);
  EXPECT_EQ(ram_.read<std::uint32_t>(mmap + 48 + 20), 1u);
  EXPECT_EQ(ram_.read<std::uint64_t>(mmap + 48 + 4), 0x100000u);

  const std::uint64_t name = info32(64);
  EXPECT_EQ(ram_.read<char>(name), 'm');
}

TEST_F(MultibootLoaderTest, StartsInProtectedModeWithTheMultibootRegisters) {
  const X86BootState s = load(make_elf(unit_test_spec())).boot_state;
  EXPECT_EQ(s.rax, 0x2badb002u);
  EXPECT_EQ(s.rbx, 0x6000u);
  EXPECT_EQ(s.rip, kText + 0x20);
  EXPECT_EQ(s.cr0 & 0x80000001u, 0x1u);
  EXPECT_EQ(s.rflags & 0x200u, 0u);
  EXPECT_TRUE(s.cs.db);
  EXPECT_FALSE(s.cs.l);
  EXPECT_EQ(s.cs.limit, 0xffffffffu);
  EXPECT_EQ(s.ds.limit, 0xffffffffu);
}

TEST_F(MultibootLoaderTest, NoInitrdMeansNoModules) {
  load(make_elf(unit_test_spec()));
  EXPECT_EQ(info32(0) & (1u << 3), 0u);
  EXPECT_EQ(info32(20), 0u);
}

TEST_F(MultibootLoaderTest, VirtualEntryIsTranslatedThroughItsSegment) {
  auto img = make_elf(unit_test_spec());
  put<std::uint32_t>(img, 52 + 8, 0xc0400000);  // segment 0 p_vaddr: higher half
  put<std::uint32_t>(img, 24, 0xc0400020);      // e_entry
  EXPECT_EQ(load(img).entry_addr, kText + 0x20);
}

TEST_F(MultibootLoaderTest, EntryOutsideSegmentsIsRejected) {
  auto img = make_elf(unit_test_spec());
  put<std::uint32_t>(img, 24, 0x900000);
  EXPECT_TRUE(throws_boot_error([&] { load(img); }, "not inside any PT_LOAD"));
}

TEST_F(MultibootLoaderTest, BadChecksumIsRejected) {
  ElfSpec spec = unit_test_spec();
  spec.segments[0].data = text_with_header(0x3, 0, 1);
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "checksum"));
}

TEST_F(MultibootLoaderTest, HeaderBeyondEightKiBIsNotFound) {
  ElfSpec spec = unit_test_spec();
  spec.segments[0].data = text_with_header(0x3, 0x2000);  // file offset > 8 KiB
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "no multiboot header"));
}

TEST_F(MultibootLoaderTest, MisalignedHeaderIsNotFound) {
  ElfSpec spec = unit_test_spec();
  spec.segments[0].data = text_with_header(0x3, 0x102);
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "no multiboot header"));
}

TEST_F(MultibootLoaderTest, VideoModeRequirementIsRejected) {
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(unit_test_spec(0x7))); }, "video mode"));
}

TEST_F(MultibootLoaderTest, AoutKludgeIsRejected) {
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(unit_test_spec(0x10003))); }, "a.out"));
}

TEST_F(MultibootLoaderTest, OptionalHighFlagBitsAreIgnored) {
  EXPECT_NO_THROW(load(make_elf(unit_test_spec(0x00020003))));
}

TEST_F(MultibootLoaderTest, TruncatedElfIsRejected) {
  auto img = make_elf(unit_test_spec());
  img.resize(img.size() - 0x80);
  EXPECT_TRUE(throws_boot_error([&] { load(img); }, "reaches past the end"));
}

TEST_F(MultibootLoaderTest, SegmentOutsideRamIsRejected) {
  ElfSpec spec = unit_test_spec();
  spec.segments[1].paddr = 64 * kMiB - 0x1000;
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "outside guest RAM"));
}

TEST_F(MultibootLoaderTest, Elf64IsRejected) {
  ElfSpec spec = unit_test_spec();
  spec.is64 = true;
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "must be ELF32"));
}

TEST_F(MultibootLoaderTest, WrongMachineIsRejected) {
  ElfSpec spec = unit_test_spec();
  spec.machine = 62;
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "EM_386"));
}

TEST_F(MultibootLoaderTest, InitrdThatDoesNotFitIsRejected) {
  const std::vector<std::byte> initrd(64 * kMiB - 0x400000);
  MultibootOptions opts;
  opts.initrd = initrd;
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(unit_test_spec()), opts); },
                                "initrd of 0x3c00000"));
}

TEST_F(MultibootLoaderTest, LoadsBelowOneMiBLikeRealmodeFlat) {
  // realmode.flat: text at 32 KiB, data up to ~56 KiB, clear of the GDT, info page and cmdline.
  ElfSpec spec = unit_test_spec(0);
  spec.entry = 0x8018;
  spec.segments = {{1, 0x8000, text_with_header(0), 0, 0x1000},
                   {1, 0xb000, pattern_bytes(0x100, 4), 0x2a30, 0x1000}};
  const LoadedKernel k = load(make_elf(spec));
  EXPECT_EQ(k.entry_addr, 0x8018u);
  EXPECT_EQ(k.load_addr, 0x8000u);
  EXPECT_EQ(ram_.read<std::uint32_t>(0x8000), 0x1badb002u);
  EXPECT_EQ(ram_.read<std::uint8_t>(0xb000 + 0x2a2f), 0u) << "bss zeroed";
  EXPECT_EQ(info32(0) & 0x40u, 0x40u) << "info block (with its e820 map) still written";
}

TEST_F(MultibootLoaderTest, SegmentOverTheInfoPageIsRejected) {
  ElfSpec spec = unit_test_spec();
  spec.segments[1].paddr = 0x5000;  // memsz 0x5000: reaches the info page at 0x6000
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "multiboot info page"));
}

TEST_F(MultibootLoaderTest, SegmentOverTheGdtIsRejected) {
  ElfSpec spec = unit_test_spec();
  spec.segments[1].paddr = 0;
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "GDT"));
}

TEST_F(MultibootLoaderTest, SegmentOverTheCommandLineIsRejected) {
  ElfSpec spec = unit_test_spec();
  spec.segments[1].paddr = 0x1f000;
  MultibootOptions opts;
  opts.cmdline = "x";
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec), opts); }, "command line"));
}

}  // namespace
}  // namespace minivmm::vmm
