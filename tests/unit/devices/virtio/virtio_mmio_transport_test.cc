// VirtioMmioTransport: the register file, feature negotiation, reset, notifications from both
// paths, interrupts and DEVICE_NEEDS_RESET, driven the way a Linux driver drives it.
#include "devices/virtio/virtio_mmio_transport.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::DescriptorChain;
using minivmm::devices::VirtioDevice;
using minivmm::devices::VirtioMmioTransport;
using minivmm::devices::VirtioQueueHost;
using minivmm::devices::Virtqueue;
using minivmm::devices::kVirtioFIndirectDesc;
using minivmm::devices::kVirtioFVersion1;
using minivmm::testing::FakeGuestRam;
using minivmm::testing::FakeIrqLine;
using minivmm::testing::FakeMmioDriver;
using minivmm::testing::FakeQueue;
using T = VirtioMmioTransport;

constexpr std::uint64_t kDeviceFeature = 1ull << 3;
constexpr std::uint32_t kAllOk =
    T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk | T::kStatusDriverOk;

// Completes every chain it is notified of with length 7.
struct FakeDevice final : VirtioDevice {
  std::string_view name() const noexcept override { return "fake"; }
  std::uint32_t device_id() const noexcept override { return 42; }
  std::uint64_t device_features() const noexcept override { return kDeviceFeature; }
  std::size_t num_queues() const noexcept override { return 2; }
  std::uint16_t queue_max_size() const noexcept override { return 16; }
  void read_config(std::uint64_t offset, std::span<std::uint8_t> data) noexcept override {
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(offset + i);
  }
  void activate(VirtioQueueHost& h, std::uint64_t f) noexcept override {
    host = &h;
    features = f;
    ++activations;
  }
  void queue_notify(std::size_t queue) noexcept override {
    notified.push_back(queue);
    DescriptorChain c;
    while (host->pop(queue, c) == Virtqueue::Pop::kChain) host->complete(queue, c.head, 7);
  }
  void reset() noexcept override {
    host = nullptr;
    ++resets;
  }
  // Stateless beyond its queues, which the transport's record holds.
  void save_state(minivmm::devices::StateWriter&) const override {}
  void load_state(minivmm::devices::StateReader&) override {}
  VirtioQueueHost* host = nullptr;
  std::uint64_t features = 0;
  int activations = 0, resets = 0;
  std::vector<std::size_t> notified;
};

struct TransportRig {
  FakeGuestRam mem{0x10000};
  FakeQueue q0{mem, 0x1000, 16}, q1{mem, 0x2000, 16};
  FakeDevice dev;
  FakeIrqLine irq;
  VirtioMmioTransport t{dev, mem.ram(), irq};
  FakeMmioDriver drv{t};
};

TEST(VirtioMmioTransportTest, IdentificationRegisters) {
  TransportRig r;
  EXPECT_EQ(r.drv.read(T::kMagicValue), 0x74726976u);
  EXPECT_EQ(r.drv.read(T::kVersionReg), 2u);
  EXPECT_EQ(r.drv.read(T::kDeviceId), 42u);
  EXPECT_EQ(r.drv.read(T::kVendorIdReg), T::kVendorId);
  r.drv.write(T::kQueueSel, 1);
  EXPECT_EQ(r.drv.read(T::kQueueNumMax), 16u);
  r.drv.write(T::kQueueSel, 2);  // no such queue
  EXPECT_EQ(r.drv.read(T::kQueueNumMax), 0u);
}

TEST(VirtioMmioTransportTest, FeaturesArePagedBySelector) {
  TransportRig r;
  r.drv.write(T::kDeviceFeaturesSel, 0);
  const std::uint32_t low = r.drv.read(T::kDeviceFeatures);
  r.drv.write(T::kDeviceFeaturesSel, 1);
  const std::uint32_t high = r.drv.read(T::kDeviceFeatures);
  r.drv.write(T::kDeviceFeaturesSel, 2);
  EXPECT_EQ(r.drv.read(T::kDeviceFeatures), 0u);
  EXPECT_EQ((std::uint64_t{high} << 32) | low, r.t.offered_features());
  EXPECT_NE(low & kDeviceFeature, 0u);
  EXPECT_EQ(high & 1u, 1u);  // VERSION_1
}

TEST(VirtioMmioTransportTest, BringUpActivatesWithTheNegotiatedFeatures) {
  TransportRig r;
  EXPECT_EQ(r.drv.bring_up(kVirtioFVersion1 | kDeviceFeature, {&r.q0, &r.q1}), kAllOk);
  EXPECT_EQ(r.dev.activations, 1);
  EXPECT_EQ(r.dev.features, kVirtioFVersion1 | kDeviceFeature);
}

TEST(VirtioMmioTransportTest, FeaturesOkIsRefusedForAnUnofferedBit) {
  TransportRig r;
  const std::uint32_t st = r.drv.bring_up(kVirtioFVersion1 | (1ull << 40), {&r.q0});
  EXPECT_EQ(st & T::kStatusFeaturesOk, 0u);
  EXPECT_EQ(st & T::kStatusDriverOk, 0u);
  EXPECT_EQ(r.dev.activations, 0);
  // Refused at FEATURES_OK and again when DRIVER_OK's write repeats the bit.
  EXPECT_EQ(r.t.stats().features_refused, 2u);
}

TEST(VirtioMmioTransportTest, FeaturesOkIsRefusedWithoutVersion1) {
  TransportRig r;
  const std::uint32_t st = r.drv.bring_up(kDeviceFeature, {&r.q0});
  EXPECT_EQ(st & T::kStatusFeaturesOk, 0u);
  EXPECT_EQ(r.dev.activations, 0);
}

TEST(VirtioMmioTransportTest, DriverFeaturesAreFrozenAfterFeaturesOk) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1, {&r.q0});
  r.drv.write(T::kDriverFeaturesSel, 0);
  r.drv.write(T::kDriverFeatures, 0xffffffff);
  EXPECT_EQ(r.t.stats().bad_accesses, 1u);
  EXPECT_EQ(r.dev.features, kVirtioFVersion1);
}

TEST(VirtioMmioTransportTest, NotifyWriteReachesTheDeviceAndInterrupts) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1, {&r.q0, &r.q1});
  r.q1.add_chain(0, {{0x8000, 64, true}});
  r.drv.notify(1);
  EXPECT_EQ(r.dev.notified, std::vector<std::size_t>{1});
  EXPECT_EQ(r.q1.used_idx(), 1);
  EXPECT_EQ(r.q1.used_len(0), 7u);
  EXPECT_EQ(r.irq.pulses(), 1);
  EXPECT_EQ(r.drv.read(T::kInterruptStatus), T::kInterruptUsedBuffer);
  r.drv.write(T::kInterruptAck, T::kInterruptUsedBuffer);
  EXPECT_EQ(r.drv.read(T::kInterruptStatus), 0u);
  EXPECT_EQ(r.t.stats().notifies_vcpu, 1u);
  EXPECT_EQ(r.t.stats().interrupts, 1u);
}

TEST(VirtioMmioTransportTest, EventfdNotificationsAreCountedApart) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1, {&r.q0});
  r.q0.add_chain(0, {{0x8000, 64, true}});
  r.t.notify_from_eventfd(0);
  EXPECT_EQ(r.q0.used_idx(), 1);
  EXPECT_EQ(r.t.stats().notifies_eventfd, 1u);
  EXPECT_EQ(r.t.stats().notifies_vcpu, 0u);
}

TEST(VirtioMmioTransportTest, NotifyBeforeDriverOkOrForAMissingQueueIsIgnored) {
  TransportRig r;
  r.drv.notify(0);
  r.drv.bring_up(kVirtioFVersion1, {&r.q0});
  r.drv.notify(5);
  EXPECT_TRUE(r.dev.notified.empty());
  EXPECT_EQ(r.t.stats().bad_notifies, 2u);
}

TEST(VirtioMmioTransportTest, StatusZeroResetsEverything) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1, {&r.q0});
  r.drv.write(T::kStatus, 0);
  EXPECT_EQ(r.drv.read(T::kStatus), 0u);
  EXPECT_EQ(r.dev.resets, 2);  // bring_up resets first, as Linux does
  r.drv.write(T::kQueueSel, 0);
  EXPECT_EQ(r.drv.read(T::kQueueReady), 0u);
  r.drv.notify(0);
  EXPECT_TRUE(r.dev.notified.empty());
  // And it comes up again on the same rings, indexes from 0.
  FakeQueue fresh{r.mem, 0x3000, 16};
  EXPECT_EQ(r.drv.bring_up(kVirtioFVersion1, {&fresh}), kAllOk);
  fresh.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(0);
  EXPECT_EQ(fresh.used_idx(), 1);
}

TEST(VirtioMmioTransportTest, RingsOutsideRamSetNeedsResetAtDriverOk) {
  TransportRig r;
  FakeQueue bad{r.mem, 0xff00, 16};  // its rings run past the 64 KiB of RAM
  const std::uint32_t st = r.drv.bring_up(kVirtioFVersion1, {&bad});
  EXPECT_NE(st & T::kStatusNeedsReset, 0u);
  EXPECT_EQ(r.dev.activations, 0);
  EXPECT_EQ(r.t.stats().needs_reset, 1u);
}

TEST(VirtioMmioTransportTest, MalformedChainSetsNeedsResetWithAConfigInterrupt) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1, {&r.q0});
  r.q0.publish(99);  // head out of range
  r.drv.notify(0);
  EXPECT_NE(r.drv.read(T::kStatus) & T::kStatusNeedsReset, 0u);
  EXPECT_EQ(r.drv.read(T::kInterruptStatus), T::kInterruptConfigChange);
  EXPECT_EQ(r.irq.pulses(), 1);
  EXPECT_EQ(r.t.stats().config_interrupts, 1u);
  EXPECT_EQ(r.t.stats().queues[0].errors[static_cast<std::size_t>(
                minivmm::devices::QueueError::kHeadOutOfRange)],
            1u);
  // Good chains after it are not served until reset.
  r.q0.add_chain(1, {{0x8000, 8, true}});
  r.drv.notify(0);
  EXPECT_EQ(r.q0.used_idx(), 0);
}

TEST(VirtioMmioTransportTest, QueueRegistersCannotMoveALiveQueue) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1, {&r.q0});
  r.drv.write(T::kQueueSel, 0);
  r.drv.write(T::kQueueDescLow, 0xf000);
  r.drv.write(T::kQueueNum, 2);
  EXPECT_EQ(r.t.stats().bad_accesses, 2u);
  r.q0.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(0);
  EXPECT_EQ(r.q0.used_idx(), 1);
}

// Linux's vm_del_vq: select the queue, write QueueReady=0, read it back (WARN_ON if not 0).
// From then on the queue is out of service: a notify is refused at the transport, counted.
TEST(VirtioMmioTransportTest, QueueReadyZeroTakesALiveQueueOutOfService) {
  TransportRig r;
  ASSERT_EQ(r.drv.bring_up(kVirtioFVersion1, {&r.q0, &r.q1}), kAllOk);
  r.drv.write(T::kQueueSel, 0);
  r.drv.write(T::kQueueReady, 0);
  EXPECT_EQ(r.drv.read(T::kQueueReady), 0u);
  r.q0.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(0);
  EXPECT_TRUE(r.dev.notified.empty());
  EXPECT_EQ(r.q0.used_idx(), 0);
  EXPECT_EQ(r.t.stats().bad_notifies, 1u);
  // The other queue is untouched.
  r.q1.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(1);
  EXPECT_EQ(r.q1.used_idx(), 1);
  r.drv.write(T::kQueueSel, 1);
  EXPECT_EQ(r.drv.read(T::kQueueReady), 1u);
}

// A request the device took before QueueReady=0 and completes after it (a blk worker) must not
// land in a ring the driver has given up (and may be reusing).
TEST(VirtioMmioTransportTest, ACompletionOwedToADisabledQueueIsNotPublished) {
  TransportRig r;
  ASSERT_EQ(r.drv.bring_up(kVirtioFVersion1, {&r.q0}), kAllOk);
  r.q0.add_chain(0, {{0x8000, 8, true}});
  DescriptorChain taken;
  ASSERT_EQ(r.dev.host->pop(0, taken), Virtqueue::Pop::kChain);  // the device holds it
  r.drv.write(T::kQueueSel, 0);
  r.drv.write(T::kQueueReady, 0);
  r.dev.host->complete(0, taken.head, 8);
  EXPECT_EQ(r.q0.used_idx(), 0);
  EXPECT_EQ(r.irq.pulses(), 0);
  EXPECT_EQ(r.drv.read(T::kInterruptStatus), 0u);
}

// Out of service, the queue's registers are the driver's again (4.2.3.2: they are written while
// QueueReady reads 0), but enabling it again under DRIVER_OK needs VIRTIO_F_RING_RESET, which is
// not offered: refused, counted, and QueueReady keeps reading 0.
TEST(VirtioMmioTransportTest, ADisabledQueueCanBeReprogrammedButNotReenabledUnderDriverOk) {
  TransportRig r;
  ASSERT_EQ(r.drv.bring_up(kVirtioFVersion1, {&r.q0}), kAllOk);
  r.drv.write(T::kQueueSel, 0);
  r.drv.write(T::kQueueReady, 0);
  const std::uint64_t bad_before = r.t.stats().bad_accesses;
  FakeQueue moved{r.mem, 0x3000, 8};
  r.drv.write(T::kQueueNum, moved.size());
  r.drv.write(T::kQueueDescLow, static_cast<std::uint32_t>(moved.desc_addr()));
  r.drv.write(T::kQueueDriverLow, static_cast<std::uint32_t>(moved.avail_addr()));
  r.drv.write(T::kQueueDeviceLow, static_cast<std::uint32_t>(moved.used_addr()));
  EXPECT_EQ(r.t.stats().bad_accesses, bad_before);  // all four taken (a live queue refuses them)
  r.drv.write(T::kQueueReady, 1);
  EXPECT_EQ(r.t.stats().bad_accesses, bad_before + 1);
  EXPECT_EQ(r.drv.read(T::kQueueReady), 0u);
  moved.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(0);
  EXPECT_EQ(moved.used_idx(), 0);
  EXPECT_TRUE(r.dev.notified.empty());
}

// Before DRIVER_OK QueueReady is a plain flag the driver may set and clear (Linux's error path in
// find_vqs deletes queues it set up); a queue cleared again does not go live at DRIVER_OK.
TEST(VirtioMmioTransportTest, QueueReadyBeforeDriverOkIsAFlagThatDecidesWhatGoesLive) {
  TransportRig r;
  r.drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver);
  r.drv.set_features(kVirtioFVersion1);
  r.drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusFeaturesOk);
  r.drv.setup_queue(0, r.q0);
  r.drv.setup_queue(1, r.q1);
  r.drv.write(T::kQueueSel, 1);
  EXPECT_EQ(r.drv.read(T::kQueueReady), 1u);
  r.drv.write(T::kQueueReady, 0);
  EXPECT_EQ(r.drv.read(T::kQueueReady), 0u);
  r.drv.write(T::kStatus, kAllOk);
  r.q0.add_chain(0, {{0x8000, 8, true}});
  r.q1.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(0);
  r.drv.notify(1);
  EXPECT_EQ(r.q0.used_idx(), 1);
  EXPECT_EQ(r.q1.used_idx(), 0);
  EXPECT_EQ(r.dev.notified, std::vector<std::size_t>{0});
}

TEST(VirtioMmioTransportTest, QueueReadyValuesOtherThanZeroAndOneAreIgnored) {
  TransportRig r;
  ASSERT_EQ(r.drv.bring_up(kVirtioFVersion1, {&r.q0}), kAllOk);
  const std::uint64_t bad_before = r.t.stats().bad_accesses;
  r.drv.write(T::kQueueSel, 0);
  r.drv.write(T::kQueueReady, 2);  // not 1: the old code took any value but 1 as 0
  EXPECT_EQ(r.t.stats().bad_accesses, bad_before + 1);
  EXPECT_EQ(r.drv.read(T::kQueueReady), 1u);
  r.q0.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(0);
  EXPECT_EQ(r.q0.used_idx(), 1);
}

// 4.2.2.1: upon reset the device clears InterruptStatus and the QueueReady bit of every queue.
TEST(VirtioMmioTransportTest, ResetClearsEveryQueueReadyAndTheInterruptStatus) {
  TransportRig r;
  ASSERT_EQ(r.drv.bring_up(kVirtioFVersion1, {&r.q0, &r.q1}), kAllOk);
  r.q1.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(1);
  ASSERT_EQ(r.drv.read(T::kInterruptStatus), T::kInterruptUsedBuffer);
  r.drv.write(T::kQueueSel, 1);  // reset also puts QueueSel back to 0; look at both
  r.drv.write(T::kStatus, 0);
  EXPECT_EQ(r.drv.read(T::kInterruptStatus), 0u);
  for (std::uint32_t q = 0; q < 2; ++q) {
    r.drv.write(T::kQueueSel, q);
    EXPECT_EQ(r.drv.read(T::kQueueReady), 0u) << "queue " << q;
    EXPECT_EQ(r.drv.read(T::kQueueNumMax), 16u) << "queue " << q;
  }
}

TEST(VirtioMmioTransportTest, RegistersNeed32BitAccesses) {
  TransportRig r;
  std::uint16_t half = 0xffff;
  r.t.read(T::kMagicValue, std::span(reinterpret_cast<std::uint8_t*>(&half), 2));
  EXPECT_EQ(half, 0);
  std::uint64_t wide = 0;
  r.t.write(T::kStatus, std::span(reinterpret_cast<std::uint8_t*>(&wide), 8));
  EXPECT_EQ(r.drv.read(T::kMagicValue + 2), 0u);  // misaligned
  EXPECT_EQ(r.drv.read(0x0c0), 0u);               // unknown offset
  r.drv.write(T::kMagicValue, 1);                 // read-only
  EXPECT_EQ(r.t.stats().bad_accesses, 5u);
}

TEST(VirtioMmioTransportTest, ConfigSpaceAnyWidthGoesToTheDevice) {
  TransportRig r;
  std::uint8_t b = 0;
  r.t.read(T::kConfig + 5, std::span(&b, 1));
  EXPECT_EQ(b, 5);
  std::uint64_t q = 0;
  r.t.read(T::kConfig, std::span(reinterpret_cast<std::uint8_t*>(&q), 8));
  EXPECT_EQ(q, 0x0706050403020100ull);
  EXPECT_EQ(r.drv.read(T::kConfigGeneration), 0u);
}

TEST(VirtioMmioTransportTest, DriverOkWithoutFeaturesOkActivatesNothing) {
  TransportRig r;
  r.drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver | T::kStatusDriverOk);
  EXPECT_EQ(r.drv.read(T::kStatus) & T::kStatusDriverOk, 0u);
  EXPECT_EQ(r.dev.activations, 0);
}

// The reviewer's probe: writing ACK|DRIVER cleared DRIVER_OK and FEATURES_OK, new features
// went in, and DRIVER_OK activated the live queues a second time (indexes back to 0).
TEST(VirtioMmioTransportTest, StatusBitsAreClearedOnlyByAReset) {
  TransportRig r;
  ASSERT_EQ(r.drv.bring_up(kVirtioFVersion1, {&r.q0}), kAllOk);
  const std::uint64_t bad_before = r.t.stats().bad_accesses;
  const int resets_before = r.dev.resets;  // bring-up starts with one
  r.drv.write(T::kStatus, T::kStatusAcknowledge | T::kStatusDriver);
  EXPECT_EQ(r.drv.read(T::kStatus), kAllOk);
  EXPECT_EQ(r.t.stats().bad_accesses, bad_before + 1);
  r.drv.write(T::kDriverFeaturesSel, 0);
  r.drv.write(T::kDriverFeatures, static_cast<std::uint32_t>(kDeviceFeature));
  r.drv.write(T::kStatus, kAllOk);
  EXPECT_EQ(r.dev.activations, 1);
  EXPECT_EQ(r.dev.features, kVirtioFVersion1);
  // Setting FAILED on top is allowed; writing 0 still resets.
  r.drv.write(T::kStatus, kAllOk | T::kStatusFailed);
  EXPECT_EQ(r.drv.read(T::kStatus), kAllOk | T::kStatusFailed);
  r.drv.write(T::kStatus, 0);
  EXPECT_EQ(r.drv.read(T::kStatus), 0u);
  EXPECT_EQ(r.dev.resets, resets_before + 1);
}

// Found by virtio_mmio_fuzz: a status write of 0x01020304 left 0x01020300 in Status, and a
// driver could set DEVICE_NEEDS_RESET itself, after which the device served nothing and no
// configuration interrupt said why. Status is 8 bits and NEEDS_RESET is the device's.
TEST(VirtioMmioTransportTest, StatusWritesWithBitsADriverDoesNotOwnAreIgnored) {
  TransportRig r;
  ASSERT_EQ(r.drv.bring_up(kVirtioFVersion1, {&r.q0}), kAllOk);
  const std::uint64_t bad_before = r.t.stats().bad_accesses;
  r.drv.write(T::kStatus, kAllOk | T::kStatusNeedsReset);
  r.drv.write(T::kStatus, kAllOk | 0x100);
  r.drv.write(T::kStatus, kAllOk | 0x20);
  EXPECT_EQ(r.drv.read(T::kStatus), kAllOk);
  EXPECT_EQ(r.t.stats().bad_accesses, bad_before + 3);
  EXPECT_EQ(r.t.stats().needs_reset, 0u);
  r.q0.add_chain(0, {{0x8000, 8, true}});
  r.drv.notify(0);
  EXPECT_EQ(r.q0.used_idx(), 1);  // still serving
}

TEST(VirtioMmioTransportTest, IndirectIsHonouredOnlyWhenNegotiated) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1 | kVirtioFIndirectDesc, {&r.q0});
  r.q0.write_desc(0x5000, 0x8000, 8, minivmm::testing::kDescWrite, 0);
  r.q0.set_desc(0, 0x5000, 16, minivmm::testing::kDescIndirect);
  r.q0.publish(0);
  r.drv.notify(0);
  EXPECT_EQ(r.q0.used_idx(), 1);
  EXPECT_EQ(r.drv.read(T::kStatus) & T::kStatusNeedsReset, 0u);
}

// The transport's part of a virtio device's report object: its counters under the names
// --stats always had, and "queues" an array with each queue's errors by name, only those that
// happened (an empty object for a queue without any). gsi, mmio_base and eventfd_reads are the
// VMM's to add; the device's own counters are VirtioDevice::report()'s.
TEST(VirtioMmioTransportTest, ReportsItsCountersAndEachQueue) {
  TransportRig r;
  r.drv.bring_up(kVirtioFVersion1, {&r.q0, &r.q1});
  r.q1.add_chain(0, {{0x8000, 64, true}});
  r.drv.notify(1);
  r.t.notify_from_eventfd(1);
  r.q0.publish(99);  // head out of range: needs reset
  r.drv.notify(0);
  minivmm::testing::MapReportWriter report;
  r.t.report(report);
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{
                "bad_accesses number", "bad_notifies number", "config_interrupts number",
                "features_refused number", "interrupts number", "needs_reset number",
                "notifies_ioeventfd number", "notifies_vcpu number", "resets number",
                "queues array", "queues/0 object", "queues/0/chains number",
                "queues/0/descriptors number", "queues/0/used number",
                "queues/0/interrupts_suppressed number", "queues/0/errors object",
                "queues/0/in_flight number", "queues/0/not_popped number",
                "queues/1/in_flight number", "queues/1/not_popped number",
                "queues/0/errors/head_out_of_range number", "queues/1 object",
                "queues/1/chains number", "queues/1/descriptors number", "queues/1/used number",
                "queues/1/interrupts_suppressed number", "queues/1/errors object"}));
  EXPECT_EQ(report.counter("notifies_vcpu"), 2u);
  EXPECT_EQ(report.counter("notifies_ioeventfd"), 1u);
  EXPECT_EQ(report.counter("needs_reset"), 1u);
  EXPECT_EQ(report.counter("queues/1/chains"), 1u);
  EXPECT_EQ(report.counter("queues/0/errors/head_out_of_range"), 1u);
}

}  // namespace
