#include "devices/host/iov_advance.h"

#include <gtest/gtest.h>

#include <array>

namespace minivmm::devices {
namespace {

struct Buffers {
  std::array<char, 16> a{}, b{}, c{};
  std::array<iovec, 5> iov{{{a.data(), a.size()},
                            {nullptr, 0},
                            {b.data(), b.size()},
                            {c.data(), c.size()},
                            {nullptr, 0}}};
};

TEST(AdvanceIovTest, NothingMovedSkipsOnlyEmptyEntries) {
  Buffers x;
  EXPECT_EQ(advance_iov(x.iov, 0, 0), 0u);
  EXPECT_EQ(advance_iov(x.iov, 1, 0), 2u);
  EXPECT_EQ(x.iov[2].iov_base, x.b.data());
  EXPECT_EQ(x.iov[2].iov_len, 16u);
}

TEST(AdvanceIovTest, PartlyMovedEntryIsTrimmedInPlace) {
  Buffers x;
  EXPECT_EQ(advance_iov(x.iov, 0, 5), 0u);
  EXPECT_EQ(x.iov[0].iov_base, x.a.data() + 5);
  EXPECT_EQ(x.iov[0].iov_len, 11u);
}

TEST(AdvanceIovTest, UsedUpEntriesAndTheEmptyOneAfterThemArePassed) {
  Buffers x;
  // All of a, the empty entry, and 3 bytes of b.
  EXPECT_EQ(advance_iov(x.iov, 0, 16 + 3), 2u);
  EXPECT_EQ(x.iov[2].iov_base, x.b.data() + 3);
  EXPECT_EQ(x.iov[2].iov_len, 13u);
  // Exactly the rest of b: the cursor stops at c, not at b's empty remains.
  EXPECT_EQ(advance_iov(x.iov, 2, 13), 3u);
  EXPECT_EQ(x.iov[3].iov_len, 16u);
}

TEST(AdvanceIovTest, EverythingMovedEndsPastTheTrailingEmptyEntry) {
  Buffers x;
  EXPECT_EQ(advance_iov(x.iov, 0, 48), x.iov.size());
  EXPECT_EQ(x.iov[3].iov_len, 0u);
}

TEST(AdvanceIovTest, MoreThanLeftIsIgnored) {
  Buffers x;
  EXPECT_EQ(advance_iov(x.iov, 3, 1000), x.iov.size());
  EXPECT_EQ(x.iov[3].iov_base, x.c.data() + 16);
  EXPECT_EQ(advance_iov(x.iov, x.iov.size(), 7), x.iov.size());
}

}  // namespace
}  // namespace minivmm::devices
