// VirtioNet against a fake back-end and the fake driver: frames each way with the 12-byte header
// stripped or written, back-pressure both ways, bad guest input counted, reset, and the hop from
// a vCPU thread to the loop.
#include "devices/virtio/net/virtio_net.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "devices/virtio/virtio_mmio_transport.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_net_backend.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/support/map_report_writer.h"

namespace {

using minivmm::devices::kMaxFrameBytes;
using minivmm::devices::kVirtioFEventIdx;
using minivmm::devices::kVirtioFVersion1;
using minivmm::devices::kVirtioNetHeaderBytes;
using minivmm::devices::NetTxResult;
using minivmm::devices::VirtioMmioTransport;
using minivmm::devices::VirtioNet;
using minivmm::devices::VirtioNetHeader;
using minivmm::testing::FakeGuestRam;
using minivmm::testing::FakeIrqLine;
using minivmm::testing::FakeMmioDriver;
using minivmm::testing::FakeNetBackend;
using minivmm::testing::FakeQueue;
using minivmm::testing::MapReportWriter;
using Frame = FakeNetBackend::Frame;
using T = VirtioMmioTransport;

constexpr std::uint64_t kFeatures = kVirtioFVersion1 | VirtioNet::kFMac | VirtioNet::kFStatus;
// Guest RAM: the rings low, then 2 KiB transmit buffers, 2 KiB receive buffers, and room for
// one frame past the largest (oversized tests).
constexpr std::uint64_t kTxBufs = 0x10000, kRxBufs = 0x60000, kOversized = 0xa0000;
constexpr std::uint64_t kSlot = 0x800;

// A frame of `n` bytes: broadcast destination, a made-up source, IPv4 ethertype, then a
// pattern that differs per `seed`.
Frame make_frame(std::size_t n, int seed = 0) {
  Frame f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = static_cast<std::uint8_t>(i * 13 + static_cast<std::size_t>(seed));
  for (std::size_t i = 0; i < 6 && i < n; ++i) f[i] = 0xff;
  if (n >= 14) {
    f[12] = 0x08;
    f[13] = 0x00;
  }
  return f;
}

struct NetRig {
  // `started`: bring the driver up (DRIVER_OK); false leaves that to the test.
  explicit NetRig(bool started = true, std::uint64_t features = kFeatures)
      : features_(features) {
    if (started) up();
  }
  void up() { EXPECT_EQ(drv.bring_up(features_, {&rxq, &txq}) & T::kStatusNeedsReset, 0u); }

  // Writes a header and `frame` at kTxBufs + slot * kSlot and offers them as one chain, split
  // into buffers at `cuts` (offsets into header + frame).
  void post_tx(std::uint16_t slot, const Frame& frame, std::vector<std::size_t> cuts = {},
               VirtioNetHeader header = {}) {
    std::vector<std::uint8_t> bytes(kVirtioNetHeaderBytes + frame.size());
    std::memcpy(bytes.data(), &header, sizeof header);
    std::memcpy(bytes.data() + kVirtioNetHeaderBytes, frame.data(), frame.size());
    const std::uint64_t at = kTxBufs + slot * kSlot;
    std::memcpy(mem.at(at), bytes.data(), bytes.size());
    std::vector<FakeQueue::Buf> bufs;
    std::size_t from = 0;
    cuts.push_back(bytes.size());
    for (const std::size_t cut : cuts) {
      bufs.push_back({at + from, static_cast<std::uint32_t>(cut - from), false});
      from = cut;
    }
    txq.add_chain(next_tx_desc_, bufs);
    next_tx_desc_ = static_cast<std::uint16_t>((next_tx_desc_ + bufs.size()) % txq.size());
  }
  // One writable buffer of `len` bytes for received frames.
  void post_rx(std::uint16_t slot, std::uint32_t len) {
    rxq.add_chain(next_rx_desc_, {{kRxBufs + slot * kSlot, len, true}});
    next_rx_desc_ = static_cast<std::uint16_t>((next_rx_desc_ + 1) % rxq.size());
  }
  Frame rx_bytes(std::uint16_t slot, std::size_t n) {
    Frame f(n);
    std::memcpy(f.data(), mem.at(kRxBufs + slot * kSlot), n);
    return f;
  }
  VirtioNetHeader rx_header(std::uint16_t slot) {
    return mem.get<VirtioNetHeader>(kRxBufs + slot * kSlot);
  }
  void run_scheduled() {
    auto batch = std::move(scheduled);
    scheduled.clear();
    for (auto& fn : batch) fn();
  }

  std::uint64_t features_;
  FakeGuestRam mem{0x120000};
  FakeQueue rxq{mem, 0x1000, 16}, txq{mem, 0x3000, 128};
  FakeNetBackend backend;
  std::vector<std::function<void()>> scheduled;
  VirtioNet net{backend, [this](std::function<void()> fn) { scheduled.push_back(std::move(fn)); }};
  FakeIrqLine irq;
  VirtioMmioTransport t{net, mem.ram(), irq};
  FakeMmioDriver drv{t};
  std::uint16_t next_tx_desc_ = 0, next_rx_desc_ = 0;
};

TEST(VirtioNetTest, OffersMacAndStatusAndReadsThemAtAnyWidth) {
  NetRig r;
  EXPECT_EQ(r.net.device_features(), VirtioNet::kFMac | VirtioNet::kFStatus);
  EXPECT_EQ(r.drv.read(T::kDeviceId), 1u);
  // Linux reads the MAC a byte at a time and status as one le16.
  const auto mac = r.net.mac();
  for (std::size_t i = 0; i < 6; ++i) {
    std::uint8_t b = 0xaa;
    r.t.read(T::kConfig + i, std::span(&b, 1));
    EXPECT_EQ(b, mac[i]) << i;
  }
  std::uint16_t status = 0;
  r.t.read(T::kConfig + 6, std::span(reinterpret_cast<std::uint8_t*>(&status), 2));
  EXPECT_EQ(status, VirtioNet::kStatusLinkUp);
  // A wide read across the MAC's tail and status, and reads past the fields: 0.
  std::uint32_t tail = 0;
  r.t.read(T::kConfig + 4, std::span(reinterpret_cast<std::uint8_t*>(&tail), 4));
  EXPECT_EQ(tail, std::uint32_t{mac[4]} | std::uint32_t{mac[5]} << 8 | 1u << 16);
  EXPECT_EQ(r.drv.read(T::kConfig + 8), 0u);
  EXPECT_EQ(r.drv.read(T::kConfig + 0xf00), 0u);
}

TEST(VirtioNetTest, TransmitHandsTheFrameWithoutItsHeaderToTheBackEnd) {
  NetRig r;
  const Frame f = make_frame(60);
  r.post_tx(0, f, {kVirtioNetHeaderBytes});  // Linux: header and frame in two buffers
  r.drv.notify(VirtioNet::kTransmitQueue);
  ASSERT_EQ(r.backend.sent.size(), 1u);
  EXPECT_EQ(r.backend.sent[0], f);
  EXPECT_EQ(r.txq.used_idx(), 1);
  EXPECT_EQ(r.txq.used_len(0), 0u);  // nothing written into a transmit buffer
  EXPECT_EQ(r.backend.transmit_dones, 1);
  const auto s = r.net.stats();
  EXPECT_EQ(s.tx_frames, 1u);
  EXPECT_EQ(s.tx_bytes, 60u);
}

// VERSION_1 implies ANY_LAYOUT: the header itself may be split, and share a buffer with the frame.
TEST(VirtioNetTest, HeaderAndFrameMayBeSplitAnywhere) {
  NetRig r;
  const Frame a = make_frame(100, 1), b = make_frame(1514, 2);
  r.post_tx(0, a);  // one buffer for both
  r.post_tx(1, b, {5, 20, 21, 700});
  r.drv.notify(VirtioNet::kTransmitQueue);
  ASSERT_EQ(r.backend.sent.size(), 2u);
  EXPECT_EQ(r.backend.sent[0], a);
  EXPECT_EQ(r.backend.sent[1], b);
}

TEST(VirtioNetTest, ReceiveWritesAZeroHeaderWithNumBuffersOneThenTheFrame) {
  NetRig r;
  r.post_rx(0, 1526);  // Linux's small buffers: 12 + 1514
  r.drv.notify(VirtioNet::kReceiveQueue);
  const Frame f = make_frame(1514, 3);
  const int pulses = r.irq.pulses();
  r.backend.inject(f);
  EXPECT_TRUE(r.backend.pending.empty());
  ASSERT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), kVirtioNetHeaderBytes + f.size());
  const VirtioNetHeader h = r.rx_header(0);
  EXPECT_EQ(h.flags, 0);
  EXPECT_EQ(h.gso_type, 0);
  EXPECT_EQ(h.hdr_len, 0);
  EXPECT_EQ(h.gso_size, 0);
  EXPECT_EQ(h.csum_start, 0);
  EXPECT_EQ(h.csum_offset, 0);
  EXPECT_EQ(h.num_buffers, 1);
  const Frame got = r.rx_bytes(0, kVirtioNetHeaderBytes + f.size());
  EXPECT_EQ(Frame(got.begin() + kVirtioNetHeaderBytes, got.end()), f);
  EXPECT_EQ(r.irq.pulses(), pulses + 1);
  EXPECT_EQ(r.net.stats().rx_frames, 1u);
  EXPECT_EQ(r.net.stats().rx_bytes, 1514u);
}

TEST(VirtioNetTest, ReceiveFillsAChainOfSeveralBuffersInOrder) {
  NetRig r;
  // 10 bytes, then 300, then 2000: the header spans the first two.
  const std::uint64_t at = kRxBufs;
  r.rxq.add_chain(0, {{at, 10, true}, {at + 0x100, 300, true}, {at + 0x400, 2000, true}});
  const Frame f = make_frame(800, 4);
  r.backend.inject(f);
  ASSERT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), 812u);
  Frame got(812);
  std::memcpy(got.data(), r.mem.at(at), 10);
  std::memcpy(got.data() + 10, r.mem.at(at + 0x100), 300);
  std::memcpy(got.data() + 310, r.mem.at(at + 0x400), 502);
  EXPECT_EQ(got[10], 1);  // num_buffers, low byte, in the second buffer
  EXPECT_EQ(Frame(got.begin() + 12, got.end()), f);
}

// The policy: the back-end keeps the frame (a TAP stops reading) and the device owes it an
// rx_space() once the guest posts buffers.
TEST(VirtioNetTest, AFrameWithoutReceiveBufferIsKeptUntilTheGuestPostsOne) {
  NetRig r;
  const Frame f1 = make_frame(64, 5), f2 = make_frame(70, 6);
  r.backend.inject(f1);
  r.backend.inject(f2);
  EXPECT_TRUE(r.backend.waiting);
  EXPECT_EQ(r.backend.refused, 1);  // the second was not offered behind the refused one
  EXPECT_EQ(r.net.stats().rx_no_buffer, 1u);
  EXPECT_EQ(r.rxq.used_idx(), 0);

  r.post_rx(0, 1526);
  r.post_rx(1, 1526);
  r.drv.notify(VirtioNet::kReceiveQueue);
  EXPECT_EQ(r.backend.rx_space_calls, 1);
  EXPECT_FALSE(r.backend.waiting);
  ASSERT_EQ(r.rxq.used_idx(), 2);
  EXPECT_EQ(r.rx_bytes(0, 76), [&] {
    Frame e(12, 0);
    e[10] = 1;
    e.insert(e.end(), f1.begin(), f1.end());
    return e;
  }());
  EXPECT_EQ(r.net.stats().rx_frames, 2u);
  // A notify with nothing owed does not bother the back-end.
  r.drv.notify(VirtioNet::kReceiveQueue);
  EXPECT_EQ(r.backend.rx_space_calls, 1);
}

TEST(VirtioNetTest, AFrameTooBigForThePostedBufferIsDroppedAndTheBufferKept) {
  NetRig r;
  r.post_rx(0, 200);
  r.backend.inject(make_frame(300));
  EXPECT_EQ(r.net.stats().rx_dropped_too_big, 1u);
  EXPECT_EQ(r.rxq.used_idx(), 0);
  EXPECT_FALSE(r.backend.waiting);  // dropped, not refused
  const Frame small = make_frame(100, 7);
  r.backend.inject(small);
  ASSERT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), 112u);
  EXPECT_EQ(r.net.stats().rx_frames, 1u);
}

TEST(VirtioNetTest, ABadReceiveChainIsReturnedUnusedAndTheNextTakesTheFrame) {
  NetRig r;
  r.rxq.add_chain(0, {{kRxBufs, 1526, false}});          // readable: not a receive buffer
  r.rxq.add_chain(1, {{kRxBufs + kSlot, 8, true}});      // no room for the header
  r.rxq.add_chain(2, {{kRxBufs + 2 * kSlot, 1526, true}});
  const Frame f = make_frame(60, 8);
  r.backend.inject(f);
  ASSERT_EQ(r.rxq.used_idx(), 3);
  EXPECT_EQ(r.rxq.used_id(0), 0u);
  EXPECT_EQ(r.rxq.used_len(0), 0u);
  EXPECT_EQ(r.rxq.used_id(1), 1u);
  EXPECT_EQ(r.rxq.used_len(1), 0u);
  EXPECT_EQ(r.rxq.used_id(2), 2u);
  EXPECT_EQ(r.rxq.used_len(2), 72u);
  EXPECT_EQ(r.net.stats().rx_bad_chains, 2u);
  EXPECT_EQ(r.net.stats().rx_frames, 1u);
}

TEST(VirtioNetTest, AGuestPostingOnlyBadReceiveChainsCostsABoundedWalkPerFrame) {
  NetRig r;
  for (std::uint16_t i = 0; i < 16; ++i) r.rxq.add_chain(i, {{kRxBufs, 4, true}});
  r.backend.inject(make_frame(60));
  EXPECT_EQ(r.rxq.used_idx(), VirtioNet::kRxBadChainsPerFrame);
  const auto s = r.net.stats();
  EXPECT_EQ(s.rx_bad_chains, VirtioNet::kRxBadChainsPerFrame);
  EXPECT_EQ(s.rx_dropped_bad_chains, 1u);
  EXPECT_FALSE(r.backend.waiting);
}

TEST(VirtioNetTest, MalformedTransmitChainsAreCountedReturnedAndNotSent) {
  NetRig r;
  std::uint16_t d = 0;
  auto next = [&](std::size_t n) {
    const std::uint16_t at = d;
    d = static_cast<std::uint16_t>(d + n);
    return at;
  };
  // A writable buffer in a transmit chain.
  r.txq.add_chain(next(2), {{kTxBufs, 12, false}, {kTxBufs + 0x100, 60, true}});
  // Only 8 bytes: no header.
  r.txq.add_chain(next(1), {{kTxBufs + kSlot, 8, false}});
  // A header and a 10-byte runt.
  r.txq.add_chain(next(1), {{kTxBufs + 2 * kSlot, 22, false}});
  // A header asking for a checksum (CSUM was not offered), and one asking for TSO.
  VirtioNetHeader csum;
  csum.flags = 1;
  r.mem.put(kTxBufs + 3 * kSlot, csum);
  r.txq.add_chain(next(1), {{kTxBufs + 3 * kSlot, 12 + 60, false}});
  VirtioNetHeader tso;
  tso.gso_type = 1;
  r.mem.put(kTxBufs + 4 * kSlot, tso);
  r.txq.add_chain(next(1), {{kTxBufs + 4 * kSlot, 12 + 60, false}});
  // One byte past the largest frame.
  r.txq.add_chain(next(1), {{kOversized, static_cast<std::uint32_t>(12 + kMaxFrameBytes + 1), false}});
  // And a good one after all of them.
  r.next_tx_desc_ = d;
  const Frame good = make_frame(60, 9);
  r.post_tx(20, good);
  r.drv.notify(VirtioNet::kTransmitQueue);

  ASSERT_EQ(r.backend.sent.size(), 1u);
  EXPECT_EQ(r.backend.sent[0], good);
  EXPECT_EQ(r.txq.used_idx(), 7);
  const auto s = r.net.stats();
  EXPECT_EQ(s.tx_malformed, 3u);
  EXPECT_EQ(s.tx_offload_refused, 2u);
  EXPECT_EQ(s.tx_oversized, 1u);
  EXPECT_EQ(s.tx_frames, 1u);
  EXPECT_EQ(r.t.status() & T::kStatusNeedsReset, 0u);  // bad frames do not break the queue
}

TEST(VirtioNetTest, TheLargestFrameGoesThroughBothWays) {
  NetRig r;
  const Frame f = make_frame(kMaxFrameBytes, 10);
  std::vector<std::uint8_t> bytes(12 + f.size(), 0);
  std::memcpy(bytes.data() + 12, f.data(), f.size());
  std::memcpy(r.mem.at(kOversized), bytes.data(), bytes.size());
  r.txq.add_chain(0, {{kOversized, static_cast<std::uint32_t>(bytes.size()), false}});
  r.drv.notify(VirtioNet::kTransmitQueue);
  ASSERT_EQ(r.backend.sent.size(), 1u);
  EXPECT_EQ(r.backend.sent[0], f);

  r.rxq.add_chain(0, {{kOversized, static_cast<std::uint32_t>(bytes.size()), true}});
  r.backend.inject(f);
  ASSERT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), bytes.size());
}

TEST(VirtioNetTest, ABackEndThatWouldBlockStopsTransmitUntilWritableAndLosesNothing) {
  NetRig r;
  r.backend.results = {NetTxResult::kWouldBlock};
  const Frame a = make_frame(60, 11), b = make_frame(61, 12), c = make_frame(62, 13);
  r.post_tx(0, a);
  r.post_tx(1, b);
  r.drv.notify(VirtioNet::kTransmitQueue);
  EXPECT_EQ(r.backend.transmit_calls, 1);
  EXPECT_TRUE(r.backend.sent.empty());
  EXPECT_EQ(r.txq.used_idx(), 0);  // the blocked frame's chain is held, not returned
  EXPECT_EQ(r.net.stats().tx_stalls, 1u);

  // More frames and notifies while blocked: nothing is tried.
  r.post_tx(2, c);
  r.drv.notify(VirtioNet::kTransmitQueue);
  EXPECT_EQ(r.backend.transmit_calls, 1);

  r.backend.make_writable();
  ASSERT_EQ(r.backend.sent.size(), 3u);
  EXPECT_EQ(r.backend.sent[0], a);
  EXPECT_EQ(r.backend.sent[1], b);
  EXPECT_EQ(r.backend.sent[2], c);
  EXPECT_EQ(r.txq.used_idx(), 3);
  EXPECT_EQ(r.txq.used_id(0), 0u);  // in order
  const auto s = r.net.stats();
  EXPECT_EQ(s.tx_frames, 3u);
  EXPECT_EQ(s.tx_stalls, 1u);
  EXPECT_EQ(s.tx_dropped_backend, 0u);
}

TEST(VirtioNetTest, AFrameTheBackEndDropsIsReturnedAndCounted) {
  NetRig r;
  r.backend.results = {NetTxResult::kDropped};
  r.post_tx(0, make_frame(60));
  r.post_tx(1, make_frame(60, 1));
  r.drv.notify(VirtioNet::kTransmitQueue);
  EXPECT_EQ(r.txq.used_idx(), 2);
  EXPECT_EQ(r.net.stats().tx_dropped_backend, 1u);
  EXPECT_EQ(r.net.stats().tx_frames, 1u);
}

// A reset while the back-end blocks: the held frame belongs to the old ring. It is neither sent
// nor completed into whatever ring the next driver sets up.
TEST(VirtioNetTest, ResetDropsTheHeldFrameAndCompletesNothingAfterIt) {
  NetRig r;
  r.backend.results = {NetTxResult::kWouldBlock};
  r.post_tx(0, make_frame(60));
  r.drv.notify(VirtioNet::kTransmitQueue);
  ASSERT_EQ(r.net.stats().tx_stalls, 1u);

  r.drv.write(T::kStatus, 0);
  FakeQueue rx2{r.mem, 0x6000, 16}, tx2{r.mem, 0x7000, 16};
  ASSERT_EQ(r.drv.bring_up(kFeatures, {&rx2, &tx2}) & T::kStatusNeedsReset, 0u);
  r.backend.make_writable();
  EXPECT_TRUE(r.backend.sent.empty());
  EXPECT_EQ(tx2.used_idx(), 0);
  EXPECT_EQ(r.net.stats().tx_dropped_reset, 1u);

  // The new driver's frames flow.
  const Frame f = make_frame(80, 14);
  std::vector<std::uint8_t> bytes(12, 0);
  bytes.insert(bytes.end(), f.begin(), f.end());
  std::memcpy(r.mem.at(kTxBufs), bytes.data(), bytes.size());
  tx2.add_chain(0, {{kTxBufs, static_cast<std::uint32_t>(bytes.size()), false}});
  r.drv.notify(VirtioNet::kTransmitQueue);
  ASSERT_EQ(r.backend.sent.size(), 1u);
  EXPECT_EQ(r.backend.sent[0], f);
  EXPECT_EQ(tx2.used_idx(), 1);
}

TEST(VirtioNetTest, HostFramesWithNoLiveDriverAreDroppedAndCounted) {
  NetRig r(/*started=*/false);
  r.backend.inject(make_frame(60));
  EXPECT_EQ(r.net.stats().rx_dropped_not_ready, 1u);
  EXPECT_FALSE(r.backend.waiting);
  EXPECT_TRUE(r.backend.pending.empty());
}

// A back-end that waits for rx_space() when the driver resets would otherwise wait until the
// next driver: it is told to offer again, and its frame is dropped as "no driver".
TEST(VirtioNetTest, ResetLetsAWaitingBackEndOfferAgain) {
  NetRig r;
  r.backend.inject(make_frame(60));
  ASSERT_TRUE(r.backend.waiting);
  r.drv.write(T::kStatus, 0);
  EXPECT_EQ(r.backend.rx_space_calls, 1);
  EXPECT_FALSE(r.backend.waiting);
  EXPECT_EQ(r.net.stats().rx_dropped_not_ready, 1u);
}

TEST(VirtioNetTest, ANotifyFromAVcpuThreadRunsOnTheLoopThread) {
  NetRig r;
  r.post_tx(0, make_frame(60));
  std::thread vcpu([&] {
    r.drv.notify(VirtioNet::kTransmitQueue);
    r.drv.notify(VirtioNet::kTransmitQueue);
    r.drv.notify(VirtioNet::kReceiveQueue);
  });
  vcpu.join();
  EXPECT_EQ(r.backend.transmit_calls, 0);  // the back-end is the loop's
  EXPECT_EQ(r.scheduled.size(), 1u);       // one hand-off carries all three
  EXPECT_EQ(r.net.stats().deferred_calls, 3u);
  r.run_scheduled();
  EXPECT_EQ(r.backend.sent.size(), 1u);
  EXPECT_EQ(r.txq.used_idx(), 1);
  // The next one from that thread is handed over again.
  r.post_tx(1, make_frame(60, 1));
  std::thread vcpu2([&] { r.drv.notify(VirtioNet::kTransmitQueue); });
  vcpu2.join();
  ASSERT_EQ(r.scheduled.size(), 1u);
  r.run_scheduled();
  EXPECT_EQ(r.backend.sent.size(), 2u);
}

TEST(VirtioNetTest, ATransmitTurnStopsAtItsCapAndContinuesFromTheLoop) {
  NetRig r;
  for (std::uint16_t i = 0; i < 100; ++i) r.post_tx(i, make_frame(60, i));
  r.drv.notify(VirtioNet::kTransmitQueue);
  EXPECT_EQ(r.backend.sent.size(), VirtioNet::kTxFramesPerTurn);
  EXPECT_EQ(r.net.stats().tx_capped, 1u);
  ASSERT_EQ(r.scheduled.size(), 1u);
  r.drv.notify(VirtioNet::kTransmitQueue);  // a notify meanwhile runs a turn of its own
  EXPECT_EQ(r.backend.sent.size(), 100u);
  r.run_scheduled();                        // the resume then finds nothing
  EXPECT_EQ(r.backend.sent.size(), 100u);
  EXPECT_TRUE(r.scheduled.empty());
  EXPECT_EQ(r.net.stats().tx_resumes, 1u);
  for (std::uint16_t i = 0; i < 100; ++i) EXPECT_EQ(r.backend.sent[i], make_frame(60, i)) << i;
  EXPECT_EQ(r.txq.used_idx(), 100);
}

// libslirp answers an ARP request from inside slirp_input: the reply reaches the guest while
// the device is in the middle of its transmit turn.
TEST(VirtioNetTest, AFrameOfferedFromInsideTransmitReachesTheGuest) {
  NetRig r;
  r.post_rx(0, 1526);
  const Frame reply = make_frame(42, 15);
  r.backend.on_transmit = [&] { r.backend.inject(reply); };
  r.post_tx(0, make_frame(42));
  r.drv.notify(VirtioNet::kTransmitQueue);
  ASSERT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), 54u);
  EXPECT_EQ(r.txq.used_idx(), 1);
}

TEST(VirtioNetTest, FramesPostedBeforeDriverOkGoOutAtDriverOk) {
  NetRig r(/*started=*/false);
  // The rings are where the driver will put them; the frame is there before DRIVER_OK.
  r.post_tx(0, make_frame(60));
  r.up();
  EXPECT_EQ(r.backend.sent.size(), 1u);
}

TEST(VirtioNetTest, EventIdxAsksForTheMissingReceiveEntry) {
  NetRig r(/*started=*/true, kFeatures | kVirtioFEventIdx);
  r.post_rx(0, 1526);
  r.backend.inject(make_frame(60));
  r.backend.inject(make_frame(61));
  EXPECT_TRUE(r.backend.waiting);
  // "Notify me when you make entry 1 available": the driver will, and the frame is delivered.
  EXPECT_EQ(r.rxq.avail_event(), 1);
  r.post_rx(1, 1526);
  r.drv.notify(VirtioNet::kReceiveQueue);
  EXPECT_EQ(r.rxq.used_idx(), 2);
}

TEST(VirtioNetTest, ABrokenQueueServesNothingMoreAndCrashesNothing) {
  NetRig r;
  r.txq.set_desc(0, kTxBufs, 72, minivmm::testing::kDescNext, 200);  // next out of range
  r.txq.publish(0);
  r.drv.notify(VirtioNet::kTransmitQueue);
  EXPECT_NE(r.t.status() & T::kStatusNeedsReset, 0u);
  EXPECT_TRUE(r.backend.sent.empty());
  r.post_rx(0, 1526);
  r.backend.inject(make_frame(60));
  EXPECT_EQ(r.net.stats().rx_dropped_not_ready, 1u);
  EXPECT_EQ(r.rxq.used_idx(), 0);
}

TEST(VirtioNetTest, ReportsItsCountersTheMacAndTheBackEnds) {
  NetRig r;
  r.post_tx(0, make_frame(60));
  r.drv.notify(VirtioNet::kTransmitQueue);
  r.backend.inject(make_frame(60));
  MapReportWriter w;
  r.net.report(w);
  EXPECT_EQ(std::get<std::string>(w.values().at("mac")), "52:54:00:12:34:56");
  EXPECT_EQ(std::get<std::string>(w.values().at("backend")), "fake");
  EXPECT_EQ(w.counter("tx_frames"), 1u);
  EXPECT_EQ(w.counter("tx_bytes"), 60u);
  EXPECT_EQ(w.counter("rx_no_buffer"), 1u);
  EXPECT_EQ(w.counter("fake/sent"), 1u);
  for (const char* key : {"tx_dropped_backend", "tx_malformed", "tx_oversized",
                          "tx_offload_refused", "tx_stalls", "tx_dropped_reset", "tx_capped",
                          "tx_resumes", "rx_frames", "rx_bytes", "rx_dropped_too_big",
                          "rx_dropped_not_ready", "rx_bad_chains", "rx_dropped_bad_chains",
                          "deferred_calls"}) {
    EXPECT_TRUE(w.has(key)) << key;
  }
}

TEST(VirtioNetTest, AttachesToItsBackEndForItsLifetime) {
  FakeNetBackend backend;
  {
    VirtioNet net(backend, nullptr);
    EXPECT_NE(backend.peer(), nullptr);
  }
  EXPECT_EQ(backend.peer(), nullptr);
  EXPECT_EQ(backend.attaches, 2);
}

}  // namespace
