// The release from hand-built images: a bzImage setup header and a vmlinux banner.
#include "vmm/exec/kernel_version.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace minivmm::vmm::exec {
namespace {

std::vector<std::uint8_t> bzimage(const std::string& version, std::uint16_t protocol = 0x020f,
                                  std::uint16_t pointer = 0x3000) {
  std::vector<std::uint8_t> img(0x4000, 0);
  std::memcpy(img.data() + 0x202, "HdrS", 4);
  std::memcpy(img.data() + 0x206, &protocol, 2);
  std::memcpy(img.data() + 0x20e, &pointer, 2);
  if (pointer + 0x200u + version.size() < img.size()) {
    std::memcpy(img.data() + 0x200 + pointer, version.data(), version.size());
  }
  return img;
}

TEST(KernelRelease, BzImageHeaderPointsAtTheVersion) {
  std::string why;
  const auto r = kernel_release(bzimage("6.1.0-57-amd64 (debian-kernel@lists.debian.org) #1 SMP"), why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(*r, "6.1.0-57-amd64");
}

TEST(KernelRelease, BzImageWithoutAPointerOrOldProtocolIsRefused) {
  std::string why;
  EXPECT_FALSE(kernel_release(bzimage("6.1", 0x0100), why));
  EXPECT_FALSE(kernel_release(bzimage("6.1", 0x020f, 0), why));
  EXPECT_FALSE(kernel_release(bzimage("6.1", 0x020f, 0xff00), why));  // past the end
  EXPECT_NE(why.find("past the end"), std::string::npos);
}

TEST(KernelRelease, HostileStringsAreRefused) {
  std::string why;
  EXPECT_FALSE(kernel_release(bzimage("../../etc"), why));
  EXPECT_FALSE(kernel_release(bzimage(""), why));
  EXPECT_FALSE(kernel_release(bzimage(std::string(65, 'a')), why));
  EXPECT_FALSE(kernel_release(bzimage("6.1\x01"), why));
  EXPECT_TRUE(kernel_release(bzimage(std::string(64, 'a')), why));
}

TEST(KernelRelease, VersionRunningOffTheFileEndsThere) {
  auto img = bzimage("");
  const std::uint16_t pointer = 0x4000 - 0x200 - 3;
  std::memcpy(img.data() + 0x20e, &pointer, 2);
  std::memcpy(img.data() + 0x4000 - 3, "6.9", 3);
  std::string why;
  const auto r = kernel_release(img, why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(*r, "6.9");
}

TEST(KernelRelease, ElfBanner) {
  std::vector<std::uint8_t> img(256, 0);
  std::memcpy(img.data(), "\x7f" "ELF", 4);
  const std::string banner = "Linux version 6.12.3-custom+ (me@host) #2";
  std::memcpy(img.data() + 100, banner.data(), banner.size());
  std::string why;
  const auto r = kernel_release(img, why);
  ASSERT_TRUE(r) << why;
  EXPECT_EQ(*r, "6.12.3-custom+");
}

TEST(KernelRelease, NeitherFormat) {
  std::string why;
  EXPECT_FALSE(kernel_release(std::vector<std::uint8_t>(16, 0), why));
  EXPECT_FALSE(kernel_release({}, why));
  std::vector<std::uint8_t> elf(64, 0);
  std::memcpy(elf.data(), "\x7f" "ELF", 4);
  EXPECT_FALSE(kernel_release(elf, why));
}

}  // namespace
}  // namespace minivmm::vmm::exec
