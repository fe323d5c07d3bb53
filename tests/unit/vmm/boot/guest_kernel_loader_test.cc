// load_kernel's multiboot path (what a BIOS would leave: IVT, ACPI with every CPU), and its
// bad-image errors, which come before KVM exists (the Machine loads into its GuestRamMapping first).
#include "vmm/boot/guest_kernel_loader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/vmm/boot/elf_builder.h"
#include "tests/unit/vmm/boot/test_ram.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

using testing::ElfSpec;
using testing::kMiB;
using testing::make_elf;
using testing::pattern_bytes;
using testing::put;
using testing::TestRam;

std::vector<std::byte> multiboot_text(std::size_t size = 0x1000) {
  auto text = pattern_bytes(size, 3);
  put<std::uint32_t>(text, 0, 0x1badb002);
  put<std::uint32_t>(text, 4, 0);
  put<std::uint32_t>(text, 8, 0u - 0x1badb002u);
  return text;
}

// Like kvm-unit-tests' x86 tests: linked at 4 MiB.
std::vector<std::byte> flat_image(std::uint64_t at = 0x400000) {
  ElfSpec spec;
  spec.is64 = false;
  spec.machine = 3;
  spec.entry = at + 0x10;
  spec.segments = {{1, at, multiboot_text(), 0, 0x1000}};
  return make_elf(spec);
}

// Offset of `sig` at a 16-byte boundary in [from, to), or 0.
std::uint64_t scan(const TestRam& ram, std::uint64_t from, std::uint64_t to, const char* sig) {
  const std::size_t n = std::strlen(sig);
  for (std::uint64_t a = from; a + n <= to; a += 16) {
    const auto b = ram.bytes(a, n);
    if (std::memcmp(b.data(), sig, n) == 0) return a;
  }
  return 0;
}

TEST(KernelLoaderTest, MultibootKernelGetsIvtAndAcpiTables) {
  TestRam ram(64 * kMiB);
  const LoadedKernel k = load_guest_kernel(ram.mem(), flat_image(), "", {}, 3);
  EXPECT_TRUE(k.bios_timer) << "the machine then leaves the PIT at 18.2 Hz with IRQ0 unmasked";
  // IRQ0's vector (0x08) reaches the BIOS timer handler at F000:FEA5, the others the IRET.
  EXPECT_EQ(ram.read<std::uint32_t>(0x8 * 4), 0xf000fea5u) << "IRQ0's vector at 0x08";
  EXPECT_EQ(ram.read<std::uint32_t>(0x9 * 4), 0xf000ff53u) << "IRQ1's vector at 0x09";
  // lib/acpi.c scans 0xe0000-0xfffff for the RSDP, then follows it to the MADT.
  EXPECT_NE(scan(ram, 0xe0000, 0x100000, "RSD PTR "), 0u);
}

TEST(KernelLoaderTest, MadtListsEveryCpu) {
  TestRam ram(64 * kMiB);
  load_guest_kernel(ram.mem(), flat_image(), "", {}, 4);
  std::uint64_t madt = 0;
  for (std::uint64_t a = 0xe0000; a < 0x100000 && madt == 0; a += 4) {
    const auto b = ram.bytes(a, 4);
    if (std::memcmp(b.data(), "APIC", 4) == 0) madt = a;
  }
  ASSERT_NE(madt, 0u);
  const auto length = ram.read<std::uint32_t>(madt + 4);
  int lapics = 0;
  for (std::uint64_t e = madt + 44; e < madt + length; e += ram.read<std::uint8_t>(e + 1)) {
    if (ram.read<std::uint8_t>(e) == 0) {
      EXPECT_EQ(ram.read<std::uint8_t>(e + 3), lapics) << "APIC id";
      ++lapics;
    }
    if (ram.read<std::uint8_t>(e + 1) == 0) break;
  }
  EXPECT_EQ(lapics, 4);
}

TEST(KernelLoaderTest, RealmodeFlatLayoutLoadsBelowOneMiB) {
  // realmode.flat: a multiboot ELF32 linked at 32 KiB that drops to real mode by itself.
  TestRam ram(64 * kMiB);
  const LoadedKernel k = load_guest_kernel(ram.mem(), flat_image(0x8000), "", {}, 1);
  EXPECT_EQ(k.entry_addr, 0x8010u);
  EXPECT_EQ(ram.read<std::uint32_t>(0x8000), 0x1badb002u);
  EXPECT_EQ(ram.read<std::uint32_t>(0), 0xf000ff53u);
}

TEST(KernelLoaderTest, KernelAtAddressZeroKeepsItsBytes) {
  TestRam ram(64 * kMiB);
  load_guest_kernel(ram.mem(), flat_image(0), "", {}, 1);
  EXPECT_EQ(ram.read<std::uint32_t>(0), 0x1badb002u) << "no IVT over the image";
}

std::string cmdline_at(TestRam& ram, std::uint64_t addr) {
  std::string s;
  for (char c; (c = static_cast<char>(ram.read<std::uint8_t>(addr))) != 0; ++addr) s += c;
  return s;
}

TEST(KernelLoaderTest, MultibootCommandLineStartsWithTheKernelNameAsQemuGivesIt) {
  // kvm-unit-tests takes the first word as argv[0]: `-append ipi` must reach vmexit.flat as
  // "x86/vmexit.flat ipi", or "ipi" becomes the program name and every test runs.
  TestRam ram(64 * kMiB);
  const LoadedKernel k = load_guest_kernel(ram.mem(), flat_image(), "ipi", {}, 1, "x86/vmexit.flat");
  EXPECT_EQ(cmdline_at(ram, k.cmdline_addr), "x86/vmexit.flat ipi");
  TestRam bare(64 * kMiB);
  const LoadedKernel b = load_guest_kernel(bare.mem(), flat_image(), "", {}, 1, "x86/vmexit.flat");
  EXPECT_EQ(cmdline_at(bare, b.cmdline_addr), "x86/vmexit.flat");
  TestRam unnamed(64 * kMiB);
  const LoadedKernel u = load_guest_kernel(unnamed.mem(), flat_image(), "a=1", {}, 1);
  EXPECT_EQ(cmdline_at(unnamed, u.cmdline_addr), "a=1");
}

int check_code(const std::vector<std::byte>& image, std::uint64_t ram = 64 * kMiB) {
  try {
    TestRam scratch(ram);
    load_guest_kernel(scratch.mem(), image, "", {}, 1);
  } catch (const VmmError& e) {
    return to_int(e.code());
  }
  return 0;
}

constexpr int kUsage = 2;
constexpr int kBadKernel = 4;

TEST(KernelCheckTest, GoodImagePasses) { EXPECT_EQ(check_code(flat_image()), 0); }

TEST(KernelCheckTest, BadMultibootChecksumIsABadKernel) {
  auto image = flat_image();
  for (std::size_t i = 0; i + 12 <= image.size(); i += 4) {
    std::uint32_t v;
    std::memcpy(&v, image.data() + i, 4);
    if (v == 0x1badb002) {
      put<std::uint32_t>(image, i + 8, 0x12345678);
      break;
    }
  }
  EXPECT_EQ(check_code(image), kBadKernel);
}

TEST(KernelCheckTest, TruncatedElfIsABadKernel) {
  const auto full = flat_image();
  EXPECT_EQ(check_code(std::vector<std::byte>(full.begin(), full.begin() + 0x60)), kBadKernel);
}

// A segment that would fit in more RAM names --memory (a usage error); one that no RAM size
// minivmm offers could hold is the image's fault (issue 20).
TEST(KernelCheckTest, SegmentOutsideRamNamesMemoryUnlessNoRamCouldHoldIt) {
  EXPECT_EQ(check_code(flat_image(0x400000), 4 * kMiB), kUsage);
  EXPECT_EQ(check_code(flat_image(0xf0000000), 4 * kMiB), kBadKernel);
}

TEST(KernelCheckTest, Elf64MultibootIsABadKernel) {
  ElfSpec spec;
  spec.is64 = true;
  spec.entry = 0x400010;
  spec.segments = {{1, 0x400000, multiboot_text(), 0, 0x1000}};
  EXPECT_EQ(check_code(make_elf(spec)), kBadKernel);
}

TEST(KernelCheckTest, GarbageIsABadKernel) {
  EXPECT_EQ(check_code(std::vector<std::byte>(8192, std::byte{'x'})), kBadKernel);
}

}  // namespace
}  // namespace minivmm::vmm
