// minivmm's multiboot loader on issue 11's real test guests (guest/tests/), without KVM: each
// image loads, its bytes survive everything the loader writes afterwards (GDT, info block,
// command line), and the low-memory window the real-mode guest and the SMP trampoline use
// (0x2000-0x5fff, guest/tests/layout.h) is left alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/unit/vmm/boot/test_ram.h"
#include "vmm/boot/elf_file.h"
#include "vmm/boot/multiboot_loader.h"

namespace minivmm::vmm {
namespace {

using testing::kMiB;
using testing::TestRam;

constexpr std::uint64_t kLowWindowStart = 0x2000;  // guest/tests/layout.h
constexpr std::uint64_t kLowWindowEnd = 0x6000;
constexpr std::byte kPoison{0x5a};

std::vector<std::byte> read_image(const std::string& name) {
  const std::string path =
      std::string(MINIVMM_TEST_GUEST_DIR) + "/minivmm-test-" + name + ".elf";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) bytes[i] = static_cast<std::byte>(chars[i]);
  return bytes;
}

class TestGuestImageTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TestGuestImageTest, LoadsIntactWithItsMultibootStart) {
  TestRam ram(64 * kMiB);
  ram.mem().fill(0, 0x100000, kPoison);
  const std::vector<std::byte> image = read_image(GetParam());
  ASSERT_FALSE(image.empty());
  MultibootOptions opts;
  opts.cmdline = "cpus=1 mem=64M";
  const LoadedKernel k = load_multiboot_kernel(ram.mem(), image, opts);

  const ElfFile elf = ElfFile::parse(image);
  EXPECT_EQ(k.entry_addr, elf.entry());  // linked with virtual == physical
  EXPECT_EQ(k.boot_state.rax, 0x2badb002u);
  bool any = false;
  for (const ElfSegment& seg : elf.segments()) {
    if (seg.type != kElfPtLoad || seg.filesz == 0) continue;
    any = true;
    const auto want = elf.contents(seg);
    EXPECT_EQ(ram.bytes(seg.paddr, seg.filesz), std::vector<std::byte>(want.begin(), want.end()))
        << "segment at " << seg.paddr << " was overwritten after loading";
  }
  EXPECT_TRUE(any);

  // Outside the image itself, the window is the guests' own.
  for (std::uint64_t a = kLowWindowStart; a < kLowWindowEnd; ++a) {
    if (a >= k.load_addr && a < k.load_end) continue;
    ASSERT_EQ(ram.read<std::byte>(a), kPoison) << "the loader wrote guest byte " << a;
  }
}

INSTANTIATE_TEST_SUITE_P(Guests, TestGuestImageTest,
                         ::testing::Values("fwcfg", "smp", "ioapic", "realmode"));

}  // namespace
}  // namespace minivmm::vmm
