#include "vmm/machine/size_parser.h"

#include <gtest/gtest.h>

namespace minivmm::vmm {
namespace {

TEST(SizeParserTest, AcceptsPlainBytesAndBinarySuffixes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("4k"), 4096u);
  EXPECT_EQ(parse_size("64M"), 64ull << 20);
  EXPECT_EQ(parse_size("64MiB"), 64ull << 20);
  EXPECT_EQ(parse_size("64MB"), 64ull << 20);
  EXPECT_EQ(parse_size("1G"), 1ull << 30);
  EXPECT_EQ(parse_size("3g"), 3ull << 30);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size("512B"), 512u);
}

TEST(SizeParserTest, RejectsMalformedValues) {
  for (const char* bad : {"", "M", "-1M", "+1M", "1.5G", "12Q", "64MiBs", "lots", " 64M", "64 M"}) {
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
  }
}

TEST(SizeParserTest, RejectsOverflow) {
  EXPECT_FALSE(parse_size("99999999999999999999999").has_value());
  EXPECT_FALSE(parse_size("17179869184G").has_value());  // 2^34 GiB = 2^64 bytes
  EXPECT_EQ(parse_size("17179869183G"), 17179869183ull << 30);
}

TEST(SizeParserTest, MailboxIsTwoPageAlignedValuesInDecimalSizesOrHex) {
  using Range = std::pair<std::uint64_t, std::uint64_t>;
  EXPECT_EQ(parse_mailbox("0x200000,4096"), (Range{0x200000, 4096}));
  EXPECT_EQ(parse_mailbox("2M,64k"), (Range{2u << 20, 64u << 10}));
  EXPECT_EQ(parse_mailbox("0,0x1000"), (Range{0, 4096}));
  for (const char* bad : {"", ",", "0x200000", "0x200000,", ",4096", "0x200001,4096",
                          "0x200000,100", "0x200000,0", "0x,4096", "0xg000,4096",
                          "0x10000000000000000,4096", "0xfffffffffffff000,0x2000",
                          "0x200000,4096,1", "-4096,4096"}) {
    EXPECT_FALSE(parse_mailbox(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace minivmm::vmm
