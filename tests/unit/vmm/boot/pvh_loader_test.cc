#include "vmm/boot/pvh_loader.h"

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
using testing::le_bytes;
using testing::make_elf;
using testing::make_note;
using testing::pattern_bytes;
using testing::TestRam;
using testing::throws_boot_error;

constexpr std::uint64_t kPvhText = 0x1000000;
constexpr std::uint64_t kData = 0x1200000;
constexpr std::uint64_t kEntry = kPvhText + 0x40;

ElfSpec vmlinux_spec() {
  ElfSpec spec;
  spec.entry = 0xffffffff81000000;  // the virtual entry a real vmlinux carries; PVH ignores it
  spec.segments = {
      {1, kPvhText, pattern_bytes(0x2000, 3), 0, 0x200000},
      {1, kData, pattern_bytes(0x800, 5), 0x3000, 0x200000},  // 0x2800 bytes of bss
      {4, 0, make_note("Xen", 18, le_bytes<std::uint32_t>(kEntry)), 0, 4},
  };
  return spec;
}

class PvhLoaderTest : public ::testing::Test {
 protected:
  LoadedKernel load(const std::vector<std::byte>& image, const PvhOptions& opts = {}) {
    return load_pvh_kernel(ram_.mem(), image, opts);
  }
  TestRam ram_{64 * kMiB};
};

TEST_F(PvhLoaderTest, LoadsSegmentsAndZeroesBss) {
  ram_.mem().fill(kData, 0x3000, std::byte{0xcc});  // stale bytes where the bss goes
  const LoadedKernel k = load(make_elf(vmlinux_spec()));
  EXPECT_EQ(ram_.bytes(kPvhText, 0x2000), pattern_bytes(0x2000, 3));
  EXPECT_EQ(ram_.bytes(kData, 0x800), pattern_bytes(0x800, 5));
  EXPECT_EQ(ram_.bytes(kData + 0x800, 0x2800), std::vector<std::byte>(0x2800));
  EXPECT_EQ(k.load_addr, kPvhText);
  EXPECT_EQ(k.load_end, kData + 0x3000);
  EXPECT_EQ(k.entry_addr, kEntry);
}

TEST_F(PvhLoaderTest, BuildsStartInfoWithMemmapCmdlineAndModule) {
  const std::vector<std::byte> initrd = pattern_bytes(5000, 0x42);
  PvhOptions opts;
  opts.cmdline = "console=hvc0";
  opts.initrd = initrd;
  opts.acpi_rsdp_addr = 0xe0000;
  const LoadedKernel k = load(make_elf(vmlinux_spec()), opts);

  const std::uint64_t si = k.boot_info_addr;
  EXPECT_EQ(si, 0x6000u);
  EXPECT_EQ(ram_.read<std::uint32_t>(si + 0), 0x336ec578u);  // magic
  EXPECT_EQ(ram_.read<std::uint32_t>(si + 4), 1u);           // version
  EXPECT_EQ(ram_.read<std::uint32_t>(si + 8), 0u);           // flags
  EXPECT_EQ(ram_.read<std::uint32_t>(si + 12), 1u);          // nr_modules
  const auto modlist = ram_.read<std::uint64_t>(si + 16);
  EXPECT_EQ(ram_.read<std::uint64_t>(si + 24), 0x20000u);    // cmdline_paddr
  EXPECT_EQ(ram_.read<std::uint64_t>(si + 32), 0xe0000u);    // rsdp_paddr
  const auto memmap = ram_.read<std::uint64_t>(si + 40);
  ASSERT_EQ(ram_.read<std::uint32_t>(si + 48), 3u);          // memmap_entries

  const std::string cmdline = "console=hvc0";
  for (std::size_t i = 0; i <= cmdline.size(); ++i) {
    EXPECT_EQ(ram_.read<char>(0x20000 + i), i < cmdline.size() ? cmdline[i] : '\0');
  }

  const std::uint64_t initrd_addr = (64 * kMiB - 5000) & ~0xfffull;
  EXPECT_EQ(ram_.read<std::uint64_t>(modlist + 0), initrd_addr);
  EXPECT_EQ(ram_.read<std::uint64_t>(modlist + 8), 5000u);
  EXPECT_EQ(ram_.read<std::uint64_t>(modlist + 16), 0u);
  EXPECT_EQ(ram_.bytes(initrd_addr, initrd.size()), initrd);
  EXPECT_EQ(k.initrd_addr, initrd_addr);

  struct Entry {
    std::uint64_t addr, size;
    std::uint32_t type;
  };
  const Entry expected[] = {
      {0, 0x9fc00, 1}, {0x9fc00, 0x60400, 2}, {0x100000, 63 * kMiB, 1}};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::uint64_t e = memmap + i * 24;
    EXPECT_EQ(ram_.read<std::uint64_t>(e), expected[i].addr) << i;
    EXPECT_EQ(ram_.read<std::uint64_t>(e + 8), expected[i].size) << i;
    EXPECT_EQ(ram_.read<std::uint32_t>(e + 16), expected[i].type) << i;
    EXPECT_EQ(ram_.read<std::uint32_t>(e + 20), 0u) << i;
  }
}

TEST_F(PvhLoaderTest, NoInitrdMeansNoModules) {
  const LoadedKernel k = load(make_elf(vmlinux_spec()));
  EXPECT_EQ(ram_.read<std::uint32_t>(0x6000 + 12), 0u);
  EXPECT_EQ(ram_.read<std::uint64_t>(0x6000 + 16), 0u);
  EXPECT_EQ(ram_.read<std::uint64_t>(0x6000 + 32), 0u);  // no RSDP given
  EXPECT_EQ(k.initrd_addr, 0u);
}

TEST_F(PvhLoaderTest, StartsIn32BitProtectedModeAtTheNoteEntry) {
  const X86BootState s = load(make_elf(vmlinux_spec())).boot_state;
  EXPECT_EQ(s.rip, kEntry);
  EXPECT_EQ(s.rbx, 0x6000u);
  EXPECT_EQ(s.cr0 & 0x80000001u, 0x1u);  // PE set, PG clear
  EXPECT_EQ(s.cr4, 0u);
  EXPECT_EQ(s.efer, 0u);
  EXPECT_EQ(s.rflags & 0x200u, 0u);  // IF clear
  EXPECT_TRUE(s.cs.db);
  EXPECT_FALSE(s.cs.l);
  EXPECT_TRUE(s.cs.g);
  EXPECT_EQ(s.cs.limit, 0xffffffffu);
  EXPECT_EQ(s.cs.base, 0u);
  EXPECT_EQ(s.cs.type, 0xb);
  for (const SegmentState* seg : {&s.ds, &s.es, &s.fs, &s.gs, &s.ss}) {
    EXPECT_EQ(seg->base, 0u);
    EXPECT_EQ(seg->limit, 0xffffffffu);
    EXPECT_EQ(seg->type, 0x3);
    EXPECT_TRUE(seg->db);
  }
  EXPECT_EQ(s.tr.limit, 0x67u);
  EXPECT_EQ(s.tr.type, 0xb);
}

TEST_F(PvhLoaderTest, AcceptsAnEightByteEntryNote) {
  ElfSpec spec = vmlinux_spec();
  spec.segments[2].data = make_note("Xen", 18, le_bytes<std::uint64_t>(kEntry));
  EXPECT_EQ(load(make_elf(spec)).entry_addr, kEntry);
}

TEST_F(PvhLoaderTest, RejectsNonElf) {
  const std::vector<std::byte> bz(4096, std::byte{0});
  EXPECT_TRUE(throws_boot_error([&] { load(bz); }, "not an ELF image"));
}

TEST_F(PvhLoaderTest, RejectsElf32) {
  ElfSpec spec = vmlinux_spec();
  spec.is64 = false;
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "must be ELF64"));
}

TEST_F(PvhLoaderTest, RejectsWrongMachine) {
  ElfSpec spec = vmlinux_spec();
  spec.machine = 183;  // EM_AARCH64
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "EM_X86_64"));
}

TEST_F(PvhLoaderTest, RejectsKernelWithoutPvhNote) {
  ElfSpec spec = vmlinux_spec();
  spec.segments[2].data = make_note("Xen", 6, le_bytes<std::uint32_t>(kEntry));
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); },
                                "not a PVH kernel: no XEN_ELFNOTE_PHYS32_ENTRY note"));
  spec.segments.pop_back();
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "not a PVH kernel"));
}

TEST_F(PvhLoaderTest, RejectsSegmentOutsideRam) {
  ElfSpec spec = vmlinux_spec();
  spec.segments[1].paddr = 64 * kMiB - 0x1000;  // bss runs off the end
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "outside guest RAM"));
}

TEST_F(PvhLoaderTest, RejectsSegmentInLowMemory) {
  ElfSpec spec = vmlinux_spec();
  spec.segments[1].paddr = 0x8000;
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "low-memory boot area"));
}

TEST_F(PvhLoaderTest, RejectsEntryOutsideTheSegments) {
  ElfSpec spec = vmlinux_spec();
  spec.segments[2].data = make_note("Xen", 18, le_bytes<std::uint32_t>(0x3000000));
  EXPECT_TRUE(throws_boot_error([&] { load(make_elf(spec)); }, "outside the loaded segments"));
}

TEST_F(PvhLoaderTest, RejectsTruncatedImage) {
  auto img = make_elf(vmlinux_spec());
  img.resize(img.size() - 0x100);
  EXPECT_TRUE(throws_boot_error([&] { load(img); }, "reaches past the end"));
}

TEST_F(PvhLoaderTest, RejectedImageLeavesRamUntouched) {
  ElfSpec spec = vmlinux_spec();
  spec.segments[1].paddr = 64 * kMiB - 0x1000;
  EXPECT_ANY_THROW(load(make_elf(spec)));
  EXPECT_EQ(ram_.read<std::uint64_t>(kPvhText), 0u);
}

}  // namespace
}  // namespace minivmm::vmm
