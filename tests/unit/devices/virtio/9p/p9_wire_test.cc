// The 9p codec: P9Reader and P9Writer against hand-built bytes, and every read or write past
// the end failing (sticky) without touching memory outside the span.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <vector>

#include "devices/virtio/9p/p9_wire.h"
#include "tests/support/ninep_frames.h"

namespace minivmm::testing {
namespace {

using devices::p9::P9Reader;
using devices::p9::P9Writer;
using devices::p9::Qid;

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}

TEST(P9Wire, ReadsLittleEndianFields) {
  const auto b = bytes({0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
                        0x0d, 0x0e, 0x0f});
  P9Reader r(b);
  EXPECT_EQ(r.u8(), 0x01);
  EXPECT_EQ(r.u16(), 0x0302);
  EXPECT_EQ(r.u32(), 0x07060504u);
  EXPECT_EQ(r.u64(), 0x0f0e0d0c0b0a0908ull);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(P9Wire, ReadsAString) {
  const auto b = bytes({3, 0, 'a', 'b', 'c', 0x7f});
  P9Reader r(b);
  EXPECT_EQ(r.str(), "abc");
  EXPECT_EQ(r.u8(), 0x7f);
  EXPECT_TRUE(r.ok());
}

TEST(P9Wire, AFieldPastTheEndFailsAndStaysFailed) {
  const auto b = bytes({1, 2, 3});
  P9Reader r(b);
  EXPECT_EQ(r.u32(), 0u);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.u8(), 0u);  // sticky: even a field that would fit now reads nothing
  EXPECT_FALSE(r.ok());
}

TEST(P9Wire, AStringLongerThanWhatIsLeftFails) {
  const auto b = bytes({0xff, 0xff, 'a', 'b'});  // claims 65535 bytes
  P9Reader r(b);
  EXPECT_EQ(r.str(), "");
  EXPECT_FALSE(r.ok());
}

TEST(P9Wire, BytesPastTheEndFail) {
  const auto b = bytes({1, 2, 3, 4});
  P9Reader r(b);
  EXPECT_EQ(r.bytes(4).size(), 4u);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.bytes(1).empty());
  EXPECT_FALSE(r.ok());
  P9Reader huge(b);
  EXPECT_TRUE(huge.bytes(0xffffffffu).empty());
  EXPECT_FALSE(huge.ok());
}

TEST(P9Wire, WritesFieldsAndQids) {
  std::array<std::byte, 32> buf{};
  P9Writer w(buf);
  w.u16(0x0201);
  w.str("hi");
  w.qid(Qid{0x80, 0x11223344, 0x0102030405060708ull});
  EXPECT_TRUE(w.ok());
  EXPECT_EQ(w.size(), 2u + 4u + 13u);
  P9Reader r(std::span<const std::byte>(buf.data(), w.size()));
  EXPECT_EQ(r.u16(), 0x0201);
  EXPECT_EQ(r.str(), "hi");
  EXPECT_EQ(r.u8(), 0x80);
  EXPECT_EQ(r.u32(), 0x11223344u);
  EXPECT_EQ(r.u64(), 0x0102030405060708ull);
}

TEST(P9Wire, AWriteThatDoesNotFitFailsAndWritesNothing) {
  std::array<std::byte, 5> buf{};
  buf.fill(std::byte{0xee});
  P9Writer w(buf);
  w.u32(1);
  w.u16(2);  // one byte of room left
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.size(), 4u);
  EXPECT_EQ(buf[4], std::byte{0xee});
  EXPECT_TRUE(w.reserve(1).empty());  // sticky
}

TEST(P9Wire, ReserveShrinkAndPatch) {
  std::array<std::byte, 16> buf{};
  P9Writer w(buf);
  w.u32(0);
  auto room = w.reserve(8);
  ASSERT_EQ(room.size(), 8u);
  w.shrink(5);
  EXPECT_EQ(w.size(), 7u);
  w.patch_u32(0, 7);
  P9Reader r(buf);
  EXPECT_EQ(r.u32(), 7u);
  w.patch_u32(6, 1);  // past what was written: ignored
  EXPECT_EQ(w.size(), 7u);
}

TEST(P9Wire, FrameBuilderMatchesTheWireLayout) {
  const auto b = t9::version(8192).bytes();
  ASSERT_EQ(b.size(), 4u + 1 + 2 + 4 + 2 + 8);
  P9Reader r(b);
  EXPECT_EQ(r.u32(), b.size());
  EXPECT_EQ(r.u8(), devices::p9::kTversion);
  EXPECT_EQ(r.u16(), devices::p9::kNoTag);
  EXPECT_EQ(r.u32(), 8192u);
  EXPECT_EQ(r.str(), "9P2000.L");
}

TEST(P9Wire, MessageNames) {
  EXPECT_EQ(devices::p9::message_name(devices::p9::kTwalk), "walk");
  EXPECT_EQ(devices::p9::message_name(3), "unknown");
}

}  // namespace
}  // namespace minivmm::testing
