// Virtqueue: the split-ring walker against good chains and every malformed thing a guest can
// write (each test names the rule), and the used ring with interrupt suppression.
#include "devices/virtio/virtqueue.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "tests/support/fake_virtio_driver.h"

namespace {

using minivmm::devices::DescriptorChain;
using minivmm::devices::QueueError;
using minivmm::devices::Virtqueue;
using minivmm::testing::FakeGuestRam;
using minivmm::testing::FakeQueue;
using minivmm::testing::kDescIndirect;
using minivmm::testing::kDescNext;
using minivmm::testing::kDescWrite;

constexpr std::size_t kRamSize = 0x10000;  // 64 KiB is room for rings and buffers
constexpr std::uint64_t kRing = 0x1000;
constexpr std::uint64_t kBuf = 0x4000;
constexpr std::uint16_t kSize = 8;

struct QueueRig {
  explicit QueueRig(bool indirect = false, bool event_idx = false) {
    q.set_size(kSize);
    q.set_desc_addr(fq.desc_addr());
    q.set_avail_addr(fq.avail_addr());
    q.set_used_addr(fq.used_addr());
    q.set_ready(true);
    activated = q.activate(mem.ram(), indirect, event_idx);
  }
  std::uint64_t error(QueueError e) const { return q.stats().errors[static_cast<std::size_t>(e)]; }

  FakeGuestRam mem{kRamSize};
  FakeQueue fq{mem, kRing, kSize};
  Virtqueue q{kSize};
  DescriptorChain chain;
  bool activated = false;
};

TEST(VirtqueueTest, EmptyRingPopsNothing) {
  QueueRig r;
  ASSERT_TRUE(r.activated);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kEmpty);
}

TEST(VirtqueueTest, ChainIsWalkedInOrderWithDirections) {
  QueueRig r;
  r.fq.add_chain(2, {{kBuf, 16, false}, {kBuf + 0x100, 512, true}, {kBuf + 0x400, 1, true}});
  ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
  EXPECT_EQ(r.chain.head, 2);
  ASSERT_EQ(r.chain.descriptors.size(), 3u);
  EXPECT_EQ(r.chain.descriptors[1].addr, kBuf + 0x100);
  EXPECT_TRUE(r.chain.descriptors[1].device_writable);
  EXPECT_FALSE(r.chain.descriptors[0].device_writable);
  EXPECT_EQ(r.chain.readable_bytes, 16u);
  EXPECT_EQ(r.chain.writable_bytes, 513u);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kEmpty);
}

TEST(VirtqueueTest, UsedRingGetsHeadAndLengthAndIndexMoves) {
  QueueRig r;
  r.fq.add_chain(5, {{kBuf, 16, true}});
  ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
  EXPECT_TRUE(r.q.push_used(r.chain.head, 9));
  EXPECT_EQ(r.fq.used_idx(), 1);
  EXPECT_EQ(r.fq.used_id(0), 5u);
  EXPECT_EQ(r.fq.used_len(0), 9u);
}

TEST(VirtqueueTest, StatsSayWhatIsPublishedPoppedAndAnsweredNow) {
  // A hung run's report must tell a notify never seen (published, not popped) from a request
  // the device holds (popped, not answered).
  QueueRig r;
  r.fq.add_chain(1, {{kBuf, 16, true}});
  r.fq.add_chain(2, {{kBuf + 0x100, 16, true}});
  EXPECT_EQ(r.q.stats().not_popped, 2u);
  EXPECT_EQ(r.q.stats().in_flight, 0u);
  ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
  EXPECT_EQ(r.q.stats().not_popped, 1u);
  EXPECT_EQ(r.q.stats().in_flight, 1u);
  r.q.push_used(r.chain.head, 0);
  EXPECT_EQ(r.q.stats().in_flight, 0u);
  EXPECT_EQ(r.q.stats().not_popped, 1u);
  r.q.reset();
  EXPECT_EQ(r.q.stats().not_popped, 0u) << "a queue out of service reads no ring";
}

TEST(VirtqueueTest, IndexesWrapAroundTheRing) {
  QueueRig r;
  for (int i = 0; i < 3 * kSize; ++i) {
    r.fq.add_chain(0, {{kBuf, 8, true}});
    ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain) << i;
    r.q.push_used(0, 1);
  }
  EXPECT_EQ(r.fq.used_idx(), 3 * kSize);
  EXPECT_EQ(r.q.stats().chains, 3u * kSize);
}

TEST(VirtqueueTest, NoInterruptFlagSuppressesAndIsCounted) {
  QueueRig r;
  r.fq.set_avail_flags(1);
  r.fq.add_chain(0, {{kBuf, 8, true}});
  ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
  EXPECT_FALSE(r.q.push_used(0, 0));
  EXPECT_EQ(r.q.stats().interrupts_suppressed, 1u);
}

TEST(VirtqueueTest, EventIdxInterruptsOnlyWhenUsedEventIsCrossed) {
  QueueRig r(false, true);
  r.fq.set_used_event(1);  // "interrupt me when entry 1 is used", i.e. the second one
  r.fq.add_chain(0, {{kBuf, 8, true}});
  r.fq.add_chain(1, {{kBuf, 8, true}});
  ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
  EXPECT_EQ(r.fq.avail_event(), 1);  // the device asks to be notified from entry 1 on
  EXPECT_FALSE(r.q.push_used(0, 0));
  ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
  EXPECT_TRUE(r.q.push_used(1, 0));
}

TEST(VirtqueueTest, AvailIndexMovingMoreThanTheSizeBreaksTheQueue) {
  QueueRig r;
  r.fq.set_avail_idx(kSize + 1);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kAvailIndexJump), 1u);
  EXPECT_TRUE(r.q.broken());
}

// The reviewer's probe: republishing a head that is still in flight popped 800 chains from an
// 8-entry queue with nothing answered, each one work the device queued.
TEST(VirtqueueTest, MoreUnansweredChainsThanTheQueueHoldsBreaksTheQueue) {
  QueueRig r;
  for (int i = 0; i < kSize; ++i) {
    r.fq.add_chain(0, {{kBuf, 8, true}});
    ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain) << i;
  }
  r.fq.add_chain(0, {{kBuf, 8, true}});  // a ninth while eight are unanswered
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kTooManyInFlight), 1u);
}

TEST(VirtqueueTest, AnsweringMakesRoomForMoreChains) {
  QueueRig r;
  for (int i = 0; i < 4 * kSize; ++i) {
    r.fq.add_chain(0, {{kBuf, 8, true}});
    ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain) << i;
    if (i >= kSize - 1) r.q.push_used(0, 1);  // keep size - 1 in flight, then steady
  }
  EXPECT_EQ(r.error(QueueError::kTooManyInFlight), 0u);
}

TEST(VirtqueueTest, HeadOutOfRangeBreaksTheQueue) {
  QueueRig r;
  r.fq.publish(kSize);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kHeadOutOfRange), 1u);
}

TEST(VirtqueueTest, NextOutOfRangeBreaksTheQueue) {
  QueueRig r;
  r.fq.set_desc(0, kBuf, 8, kDescNext, 200);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kNextOutOfRange), 1u);
}

TEST(VirtqueueTest, LoopInAChainIsDetectedNotFollowedForever) {
  QueueRig r;
  r.fq.set_desc(0, kBuf, 8, kDescNext, 1);
  r.fq.set_desc(1, kBuf, 8, kDescNext, 0);  // 0 -> 1 -> 0 -> ...
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kChainTooLong), 1u);
}

TEST(VirtqueueTest, SelfLoopIsDetected) {
  QueueRig r;
  r.fq.set_desc(3, kBuf, 8, kDescNext, 3);
  r.fq.publish(3);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kChainTooLong), 1u);
}

TEST(VirtqueueTest, BufferPastTheEndOfRamBreaksTheQueue) {
  QueueRig r;
  r.fq.add_chain(0, {{kRamSize - 4, 8, true}});
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kBufferOutsideRam), 1u);
}

TEST(VirtqueueTest, BufferWhoseEndWrapsIsOutsideRam) {
  QueueRig r;
  r.fq.add_chain(0, {{UINT64_MAX - 2, 0x10, true}});
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kBufferOutsideRam), 1u);
}

TEST(VirtqueueTest, ABrokenQueueStaysBrokenUntilReset) {
  QueueRig r;
  r.fq.publish(kSize);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  r.fq.add_chain(0, {{kBuf, 8, true}});
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_FALSE(r.q.push_used(0, 0));
  r.q.reset();
  EXPECT_FALSE(r.q.broken());
  EXPECT_FALSE(r.q.ready());
  EXPECT_EQ(r.q.size(), 0);
}

TEST(VirtqueueTest, IndirectTableIsFlattenedIntoTheChain) {
  QueueRig r(true);
  const std::uint64_t table = 0x3000;
  r.fq.write_desc(table, kBuf, 16, kDescNext, 1);
  r.fq.write_desc(table + 16, kBuf + 0x200, 4096, kDescWrite | kDescNext, 2);
  r.fq.write_desc(table + 32, kBuf + 0x2000, 1, kDescWrite, 0);
  r.fq.set_desc(4, table, 48, kDescIndirect);
  r.fq.publish(4);
  ASSERT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
  EXPECT_EQ(r.chain.head, 4);
  ASSERT_EQ(r.chain.descriptors.size(), 3u);
  EXPECT_EQ(r.chain.descriptors[1].len, 4096u);
  EXPECT_EQ(r.chain.writable_bytes, 4097u);
}

TEST(VirtqueueTest, IndirectWithoutTheFeatureBreaksTheQueue) {
  QueueRig r(false);
  r.fq.write_desc(0x3000, kBuf, 16, 0, 0);
  r.fq.set_desc(0, 0x3000, 16, kDescIndirect);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kIndirectNotOffered), 1u);
}

TEST(VirtqueueTest, NestedIndirectBreaksTheQueue) {
  QueueRig r(true);
  r.fq.write_desc(0x3000, 0x3000, 16, kDescIndirect, 0);  // a table pointing at itself
  r.fq.set_desc(0, 0x3000, 16, kDescIndirect);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kIndirectNested), 1u);
}

TEST(VirtqueueTest, IndirectTableSizesThatAreNotWholeDescriptorsBreakTheQueue) {
  for (std::uint32_t len : {0u, 15u, 17u, (Virtqueue::kMaxIndirect + 1) * 16}) {
    QueueRig r(true);
    r.fq.set_desc(0, 0x3000, len, kDescIndirect);
    r.fq.publish(0);
    EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken) << len;
    EXPECT_EQ(r.error(QueueError::kIndirectBadSize), 1u) << len;
  }
}

TEST(VirtqueueTest, IndirectTableOutsideRamBreaksTheQueue) {
  QueueRig r(true);
  r.fq.set_desc(0, kRamSize - 16, 32, kDescIndirect);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kIndirectOutsideRam), 1u);
}

TEST(VirtqueueTest, LoopInsideAnIndirectTableIsDetected) {
  QueueRig r(true);
  r.fq.write_desc(0x3000, kBuf, 8, kDescNext, 1);
  r.fq.write_desc(0x3010, kBuf, 8, kDescNext, 0);
  r.fq.set_desc(0, 0x3000, 32, kDescIndirect);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kChainTooLong), 1u);
}

TEST(VirtqueueTest, IndirectNextPastTheTableBreaksTheQueue) {
  QueueRig r(true);
  r.fq.write_desc(0x3000, kBuf, 8, kDescNext, 2);  // the table holds 2
  r.fq.set_desc(0, 0x3000, 32, kDescIndirect);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kNextOutOfRange), 1u);
}

TEST(VirtqueueTest, IndirectBufferOutsideRamBreaksTheQueue) {
  QueueRig r(true);
  r.fq.write_desc(0x3000, kRamSize, 1, 0, 0);
  r.fq.set_desc(0, 0x3000, 16, kDescIndirect);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kBufferOutsideRam), 1u);
}

TEST(VirtqueueTest, IndirectTogetherWithNextBreaksTheQueue) {
  QueueRig r(true);
  r.fq.write_desc(0x3000, kBuf, 8, 0, 0);
  r.fq.set_desc(0, 0x3000, 16, kDescIndirect | kDescNext, 1);
  r.fq.publish(0);
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kBroken);
  EXPECT_EQ(r.error(QueueError::kIndirectWithNext), 1u);
}

TEST(VirtqueueTest, ActivationRefusesBadSizes) {
  for (int size : {0, 3, 16}) {  // 16 is above this queue's maximum of 8
    FakeGuestRam mem(kRamSize);
    Virtqueue q(kSize);
    q.set_size(static_cast<std::uint16_t>(size));
    q.set_desc_addr(kRing);
    q.set_avail_addr(kRing + 0x800);
    q.set_used_addr(kRing + 0xc00);
    EXPECT_FALSE(q.activate(mem.ram(), false, false)) << size;
    EXPECT_EQ(q.stats().errors[static_cast<std::size_t>(QueueError::kBadSize)], 1u);
  }
}

TEST(VirtqueueTest, ActivationRefusesRingsOutsideRamAndMisalignment) {
  FakeGuestRam mem(kRamSize);
  Virtqueue q(kSize);
  q.set_size(kSize);
  q.set_desc_addr(kRamSize - 64);  // the table needs 128 bytes
  q.set_avail_addr(kRing + 0x800);
  q.set_used_addr(kRing + 0xc00);
  EXPECT_FALSE(q.activate(mem.ram(), false, false));
  EXPECT_EQ(q.stats().errors[static_cast<std::size_t>(QueueError::kRingOutsideRam)], 1u);
  q.set_desc_addr(kRing + 8);
  EXPECT_FALSE(q.activate(mem.ram(), false, false));
  EXPECT_EQ(q.stats().errors[static_cast<std::size_t>(QueueError::kMisaligned)], 1u);
  q.set_desc_addr(kRing);
  q.set_used_addr(UINT64_MAX - 3);
  EXPECT_FALSE(q.activate(mem.ram(), false, false));
  EXPECT_EQ(q.stats().errors[static_cast<std::size_t>(QueueError::kRingOutsideRam)], 2u);
}

TEST(VirtqueueTest, ZeroLengthBufferAtTheEndOfRamIsAccepted) {
  QueueRig r;
  r.fq.add_chain(0, {{kRamSize, 0, true}});
  EXPECT_EQ(r.q.pop(r.chain), Virtqueue::Pop::kChain);
}

}  // namespace
