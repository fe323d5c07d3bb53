// Snapshot records of the virtio-mmio transport with virtio-console and virtio-net behind it
// (issue 23). A driver brings a device up and is served; the device quiesces and saves; a
// freshly made transport and device over the same guest RAM load the record, read the same
// registers, and serve the next request at the next used-ring entry. A chain the device holds
// makes save_state() refuse until quiesce() hands it back, and the restored device takes it
// again. Hostile records (short, long, impossible values, another device's) are refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "devices/virtio/net/virtio_net.h"
#include "devices/virtio/virtio_console.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_net_backend.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/support/vector_sink.h"
#include "tests/unit/devices/virtio/virtio_state_support.h"

namespace minivmm::testing {
namespace {

using devices::kVirtioFEventIdx;
using devices::kVirtioFIndirectDesc;
using devices::kVirtioFVersion1;
using devices::StateError;
using devices::VirtioConsole;
using devices::VirtioNet;
using T = devices::VirtioMmioTransport;
namespace mr = mmio_record;

// The registers a driver can read back, queue by queue; equal on a restored transport.
std::vector<std::uint32_t> registers(FakeMmioDriver& drv, std::uint32_t queues) {
  std::vector<std::uint32_t> r;
  for (const std::uint32_t sel : {0u, 1u}) {
    drv.write(T::kDeviceFeaturesSel, sel);
    r.push_back(drv.read(T::kDeviceFeatures));
  }
  for (const std::uint64_t reg : {T::kMagicValue, T::kVersionReg, T::kDeviceId,
                                  T::kInterruptStatus, T::kStatus, T::kConfigGeneration}) {
    r.push_back(drv.read(reg));
  }
  for (std::uint32_t q = 0; q < queues; ++q) {
    drv.write(T::kQueueSel, q);
    r.push_back(drv.read(T::kQueueNumMax));
    r.push_back(drv.read(T::kQueueReady));
  }
  return r;
}

// --- virtio-console -------------------------------------------------------------------------

constexpr std::uint64_t kConTx = 0x8000, kConRx = 0x9000, kConBig = 0x20000;

struct ConsoleSide {
  explicit ConsoleSide(const FakeGuestRam& mem) : t(console, mem.ram(), irq) {}
  VectorSink out;
  VirtioConsole console{out};
  FakeIrqLine irq;
  T t;
  FakeMmioDriver drv{t};
};

struct ConsoleRig {
  ConsoleRig() { a.drv.bring_up(kVirtioFVersion1 | kVirtioFEventIdx, {&rxq, &txq}); }
  void put_text(std::uint64_t at, const std::string& s) { std::memcpy(mem.at(at), s.data(), s.size()); }
  std::string text(std::uint64_t at, std::size_t n) {
    return std::string(reinterpret_cast<const char*>(mem.at(at)), n);
  }
  std::span<const std::uint8_t> bytes(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
  }
  FakeGuestRam mem{0x200000};
  FakeQueue rxq{mem, 0x1000, 8}, txq{mem, 0x2000, 8};
  ConsoleSide a{mem};
};

TEST(VirtioConsoleStateTest, RestoredConsoleServesTheNextChainsAtTheNextUsedEntries) {
  ConsoleRig r;
  r.put_text(kConTx, "before\n");
  r.txq.add_chain(0, {{kConTx, 7, false}});
  r.a.drv.notify(1);
  r.rxq.add_chain(0, {{kConRx, 16, true}});
  r.a.drv.notify(0);
  ASSERT_EQ(r.a.console.receive(r.bytes("ab")), 2u);
  // No receive buffer left: this input waits in the device, and is part of its record.
  ASSERT_EQ(r.a.console.receive(r.bytes("xyz")), 3u);
  ASSERT_EQ(r.txq.used_idx(), 1);
  ASSERT_EQ(r.rxq.used_idx(), 1);
  r.a.t.quiesce();
  const Record record = save_record(r.a.t);

  ConsoleSide b(r.mem);
  load_record(b.t, record);
  EXPECT_EQ(save_record(b.t), record);
  EXPECT_EQ(registers(b.drv, 2), registers(r.a.drv, 2));
  EXPECT_EQ(b.drv.read(T::kStatus) & T::kStatusDriverOk, T::kStatusDriverOk);

  // EVENT_IDX: the driver asks for an interrupt at each next entry.
  r.txq.set_used_event(1);
  r.rxq.set_used_event(1);
  r.put_text(kConTx + 0x100, "after\n");
  r.txq.add_chain(1, {{kConTx + 0x100, 6, false}});
  b.drv.notify(1);
  EXPECT_EQ(b.out.str(), "after\n");
  EXPECT_EQ(r.txq.used_idx(), 2);
  EXPECT_EQ(r.txq.used_id(1), 1u);
  r.rxq.add_chain(1, {{kConRx + 0x100, 16, true}});
  b.drv.notify(0);
  EXPECT_EQ(r.rxq.used_idx(), 2);
  EXPECT_EQ(r.rxq.used_id(1), 1u);
  EXPECT_EQ(r.rxq.used_len(1), 3u);
  EXPECT_EQ(r.text(kConRx + 0x100, 3), "xyz");
  EXPECT_EQ(b.console.stats().tx_chains, 2u);
  EXPECT_EQ(b.irq.pulses(), 2);
}

TEST(VirtioConsoleStateTest, ChainHeldAfterTheFlushIsGivenBackAndSentAgainAfterLoad) {
  ConsoleRig r;
  // More than kTxFlushTurns turns of output in one buffer: quiesce cannot send it all.
  const std::size_t n = (VirtioConsole::kTxFlushTurns + 4) * VirtioConsole::kTxBytesPerTurn;
  r.mem.fill(kConBig, n, 'q');
  r.put_text(kConBig, "start");
  r.txq.add_chain(0, {{kConBig, static_cast<std::uint32_t>(n), false}});
  r.a.drv.notify(1);  // one turn; the chain stays held (no on_tx_pending hook)
  EXPECT_THROW(save_record(r.a.t), StateError);
  r.a.t.quiesce();
  EXPECT_EQ(r.txq.used_idx(), 0);
  const Record record = save_record(r.a.t);

  ConsoleSide b(r.mem);
  load_record(b.t, record);
  // Activation popped it again: its first turn starts from the buffer's start.
  EXPECT_EQ(b.out.str().substr(0, 5), "start");
  EXPECT_EQ(b.out.str().size(), VirtioConsole::kTxBytesPerTurn);
}

// --- virtio-net -----------------------------------------------------------------------------

constexpr std::uint64_t kNetFeatures =
    kVirtioFVersion1 | kVirtioFEventIdx | VirtioNet::kFMac | VirtioNet::kFStatus;
constexpr std::uint64_t kNetTx = 0x10000, kNetRx = 0x20000;

FakeNetBackend::Frame frame(std::size_t n, int seed) {
  FakeNetBackend::Frame f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = static_cast<std::uint8_t>(i * 7 + static_cast<std::size_t>(seed));
  return f;
}

struct NetSide {
  explicit NetSide(const FakeGuestRam& mem) : t(net, mem.ram(), irq) {}
  FakeNetBackend backend;
  VirtioNet net{backend, nullptr};
  FakeIrqLine irq;
  T t;
  FakeMmioDriver drv{t};
};

struct NetRig {
  NetRig() { a.drv.bring_up(kNetFeatures, {&rxq, &txq}); }
  // Header and frame in one buffer at kNetTx + slot * 0x800.
  void post_tx(std::uint16_t slot, const FakeNetBackend::Frame& f) {
    const std::uint64_t at = kNetTx + slot * 0x800u;
    mem.fill(at, devices::kVirtioNetHeaderBytes, 0);
    std::memcpy(mem.at(at + devices::kVirtioNetHeaderBytes), f.data(), f.size());
    txq.add_chain(slot, {{at, static_cast<std::uint32_t>(devices::kVirtioNetHeaderBytes + f.size()), false}});
  }
  void post_rx(std::uint16_t slot, std::uint32_t len) {
    rxq.add_chain(slot, {{kNetRx + slot * 0x800u, len, true}});
  }
  FakeNetBackend::Frame rx_frame(std::uint16_t slot, std::size_t n) {
    FakeNetBackend::Frame f(n);
    std::memcpy(f.data(), mem.at(kNetRx + slot * 0x800u + devices::kVirtioNetHeaderBytes), n);
    return f;
  }
  FakeGuestRam mem{0x40000};
  FakeQueue rxq{mem, 0x1000, 16}, txq{mem, 0x3000, 16};
  NetSide a{mem};
};

TEST(VirtioNetStateTest, RestoredNetServesTheNextFramesAtTheNextUsedEntries) {
  NetRig r;
  r.post_rx(0, 0x800);
  r.post_rx(1, 0x800);
  r.a.backend.inject(frame(60, 1));
  r.post_tx(0, frame(70, 2));
  r.a.drv.notify(1);
  ASSERT_EQ(r.rxq.used_idx(), 1);
  ASSERT_EQ(r.txq.used_idx(), 1);
  r.a.t.quiesce();
  const Record record = save_record(r.a.t);

  NetSide b(r.mem);
  load_record(b.t, record);
  EXPECT_EQ(save_record(b.t), record);
  EXPECT_EQ(registers(b.drv, 2), registers(r.a.drv, 2));
  EXPECT_EQ(b.net.stats().rx_frames, 1u);

  b.backend.inject(frame(80, 3));
  EXPECT_EQ(r.rxq.used_idx(), 2);
  EXPECT_EQ(r.rxq.used_id(1), 1u);
  EXPECT_EQ(r.rxq.used_len(1), devices::kVirtioNetHeaderBytes + 80);
  EXPECT_EQ(r.rx_frame(1, 80), frame(80, 3));
  r.post_tx(1, frame(90, 4));
  b.drv.notify(1);
  ASSERT_EQ(b.backend.sent.size(), 1u);
  EXPECT_EQ(b.backend.sent[0], frame(90, 4));
  EXPECT_EQ(r.txq.used_idx(), 2);
  EXPECT_EQ(r.txq.used_id(1), 1u);
  EXPECT_EQ(b.net.stats().rx_frames, 2u);
  EXPECT_EQ(b.net.stats().tx_frames, 2u);
}

TEST(VirtioNetStateTest, HeldReceiveBufferIsGivenBackAndRetakenAfterLoad) {
  NetRig r;
  r.post_rx(0, 100);
  r.a.backend.inject(frame(200, 1));  // too big for the buffer: dropped, the buffer kept
  ASSERT_EQ(r.a.net.stats().rx_dropped_too_big, 1u);
  EXPECT_THROW(save_record(r.a.t), StateError);
  r.a.t.quiesce();
  EXPECT_EQ(r.rxq.used_idx(), 0);  // handed back to the ring, not to the driver
  const Record record = save_record(r.a.t);

  NetSide b(r.mem);
  load_record(b.t, record);
  b.backend.inject(frame(50, 2));
  EXPECT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_id(0), 0u);
  EXPECT_EQ(r.rxq.used_len(0), devices::kVirtioNetHeaderBytes + 50);
  EXPECT_EQ(r.rx_frame(0, 50), frame(50, 2));
}

TEST(VirtioNetStateTest, TransmitChainABlockedBackendHeldIsSentAfterLoad) {
  NetRig r;
  r.a.backend.next_result = devices::NetTxResult::kWouldBlock;
  r.post_tx(0, frame(64, 5));
  r.a.drv.notify(1);
  ASSERT_EQ(r.a.net.stats().tx_stalls, 1u);
  EXPECT_THROW(save_record(r.a.t), StateError);
  r.a.t.quiesce();
  EXPECT_EQ(r.txq.used_idx(), 0);
  const Record record = save_record(r.a.t);

  NetSide b(r.mem);
  load_record(b.t, record);  // activation pops it again and the new back-end takes it
  ASSERT_EQ(b.backend.sent.size(), 1u);
  EXPECT_EQ(b.backend.sent[0], frame(64, 5));
  EXPECT_EQ(r.txq.used_idx(), 1);
  EXPECT_EQ(b.net.stats().tx_frames, 1u);
  EXPECT_EQ(b.net.stats().tx_stalls, 1u);  // the saved counters, with what activation did
}

// --- hostile transport records ---------------------------------------------------------------

Record console_record(ConsoleRig& r) {
  r.a.t.quiesce();
  return save_record(r.a.t);
}

bool console_refuses(const FakeGuestRam& mem, const Record& record) {
  ConsoleSide fresh(mem);
  return refused([&](const Record& rec) { load_record(fresh.t, rec); }, record);
}

TEST(VirtioMmioStateTest, LayoutIsTheOneTheseTestsPatch) {
  ConsoleRig r;
  const Record record = console_record(r);
  EXPECT_EQ(record[mr::kVersion], 2);
  EXPECT_EQ(peek<std::uint32_t>(record, mr::kDeviceId), VirtioConsole::kDeviceId);
  EXPECT_EQ(peek<std::uint32_t>(record, mr::kQueueCount), 2u);
  EXPECT_EQ(peek<std::uint16_t>(record, mr::queue(1, mr::kSize)), 8);
  EXPECT_EQ(peek<std::uint64_t>(record, mr::queue(1, mr::kUsed)), r.txq.used_addr());
  EXPECT_EQ(record[mr::queue(1, mr::kActive)], 1);
  EXPECT_EQ(record.size(), mr::device_record(2) + 4 + peek<std::uint32_t>(record, mr::device_record(2)));
}

TEST(VirtioMmioStateTest, TruncatedOrLongerRecordsAreRefused) {
  ConsoleRig r;
  ASSERT_EQ(r.a.console.receive(r.bytes("pending")), 7u);  // a device record with bytes in it
  const Record record = console_record(r);
  expect_truncations_refused(record, [&](const Record& rec) {
    ConsoleSide fresh(r.mem);
    load_record(fresh.t, rec);
  });
}

TEST(VirtioMmioStateTest, ImpossibleQueueConfigurationsAreRefused) {
  ConsoleRig r;
  const Record good = console_record(r);
  ASSERT_FALSE(console_refuses(r.mem, good));
  const auto refuses = [&](std::function<void(Record&)> patch) {
    Record bad = good;
    patch(bad);
    return console_refuses(r.mem, bad);
  };
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint16_t>(b, mr::queue(0, mr::kSize), 12); }))
      << "size not a power of two";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint16_t>(b, mr::queue(1, mr::kSize), 128); }))
      << "size above the console's maximum of 64";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint16_t>(b, mr::queue(1, mr::kSize), 0); }));
  EXPECT_TRUE(refuses([&](Record& b) { poke<std::uint64_t>(b, mr::queue(0, mr::kDesc), r.mem.size()); }))
      << "descriptor table outside RAM";
  EXPECT_TRUE(refuses([&](Record& b) { poke<std::uint64_t>(b, mr::queue(1, mr::kUsed), r.mem.size() - 8); }))
      << "used ring running past the end of RAM";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint64_t>(b, mr::queue(0, mr::kAvail), ~std::uint64_t{1}); }))
      << "available ring at an address that wraps";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint64_t>(b, mr::queue(0, mr::kDesc), 0x1008); }))
      << "misaligned descriptor table";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint16_t>(b, mr::queue(0, mr::kNextAvail), 1); }))
      << "a chain in flight";
  EXPECT_TRUE(refuses([](Record& b) { b[mr::queue(0, mr::kBroken)] = 1; }))
      << "live and broken";
  EXPECT_TRUE(refuses([](Record& b) { b[mr::queue(0, mr::kReady)] = 0; }))
      << "live while the driver took it out";
  EXPECT_TRUE(refuses([](Record& b) { b[mr::queue(0, mr::kIndirect)] = 1; }))
      << "indirect descriptors the driver did not negotiate";
  EXPECT_TRUE(refuses([](Record& b) { b[mr::queue(0, mr::kEventIdx)] = 0; }))
      << "EVENT_IDX negotiated but not used by a live queue";
  EXPECT_TRUE(refuses([](Record& b) { b[mr::queue(0, mr::kActive)] = 2; })) << "a flag of 2";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint32_t>(b, mr::kQueueCount, 3); }));
}

TEST(VirtioMmioStateTest, ImpossibleRegistersAreRefused) {
  ConsoleRig r;
  const Record good = console_record(r);
  const auto refuses = [&](std::function<void(Record&)> patch) {
    Record bad = good;
    patch(bad);
    return console_refuses(r.mem, bad);
  };
  const std::uint32_t status = peek<std::uint32_t>(good, mr::kStatus);
  EXPECT_TRUE(refuses([&](Record& b) { poke<std::uint32_t>(b, mr::kStatus, status | 0x10); }));
  EXPECT_TRUE(refuses([&](Record& b) { poke<std::uint32_t>(b, mr::kStatus, status | 0x100); }));
  EXPECT_TRUE(refuses([&](Record& b) { poke<std::uint32_t>(b, mr::kStatus, status & ~T::kStatusFeaturesOk); }))
      << "DRIVER_OK without FEATURES_OK";
  EXPECT_TRUE(refuses([&](Record& b) { poke<std::uint32_t>(b, mr::kStatus, T::kStatusAcknowledge); }))
      << "live without DRIVER_OK";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint64_t>(b, mr::kDriverFeatures, kVirtioFEventIdx); }))
      << "FEATURES_OK without VERSION_1";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint64_t>(b, mr::kDriverFeatures, kVirtioFVersion1 | kVirtioFEventIdx | 1); }))
      << "a feature the console does not offer";
  EXPECT_TRUE(refuses([](Record& b) { poke<std::uint32_t>(b, mr::kInterruptStatus, 4); }));
  EXPECT_TRUE(refuses([](Record& b) { b[mr::kLive] = 0; })) << "live queues, transport not live";
  EXPECT_TRUE(refuses([](Record& b) { b[mr::kVersion] = 1; })) << "the layout without a device id";
}

TEST(VirtioMmioStateTest, AnotherDevicesRecordIsRefusedEvenWhenItsLengthFits) {
  ConsoleRig r;
  // Console input waiting for a buffer makes the console's device record exactly as long as
  // virtio-net's (1 + 4 + 84 + 7 * 8 = 1 + 18 * 8): both have two queues, and net offers the
  // console's features. Only the record's device id tells them apart.
  ASSERT_EQ(r.a.console.receive(r.bytes(std::string(84, 'k'))), 84u);
  const Record record = console_record(r);
  ASSERT_EQ(peek<std::uint32_t>(record, mr::device_record(2)), 1u + 18 * 8);
  NetSide net(r.mem);
  EXPECT_THROW(load_record(net.t, record), StateError);
  EXPECT_EQ(net.t.status(), 0u);

  NetRig n;
  n.a.t.quiesce();
  const Record net_record = save_record(n.a.t);
  ConsoleSide console(n.mem);
  EXPECT_THROW(load_record(console.t, net_record), StateError);
}

TEST(VirtioMmioStateTest, QueueSizeADriverWroteBeforeDriverOkLoadsBack) {
  // QueueNum takes any 16-bit value until DRIVER_OK (activation then refuses a bad one), so a
  // snapshot taken in between holds it; the restore must not refuse a state the guest made.
  FakeGuestRam mem{0x10000};
  ConsoleSide a(mem);
  a.drv.write(T::kStatus, T::kStatusAcknowledge);
  a.drv.write(T::kQueueSel, 1);
  a.drv.write(T::kQueueNum, 1024);
  const Record record = save_record(a.t);
  ConsoleSide b(mem);
  load_record(b.t, record);
  EXPECT_EQ(save_record(b.t), record);
}

TEST(VirtioMmioStateTest, TransportWithNoDriverRoundTrips) {
  FakeGuestRam mem{0x10000};
  ConsoleSide a(mem);
  const Record record = save_record(a.t);
  ConsoleSide b(mem);
  load_record(b.t, record);
  EXPECT_EQ(save_record(b.t), record);
  EXPECT_EQ(b.t.status(), 0u);
}

}  // namespace
}  // namespace minivmm::testing
