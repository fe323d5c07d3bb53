// VirtioConsole: guest output to the sink, host input into posted receive buffers, and the
// UART's back-pressure contract (bounded buffer, hook when room appears, nothing dropped).
#include "devices/virtio_console.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "devices/virtio_mmio_transport.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/support/vector_sink.h"

namespace {

using minivmm::devices::VirtioConsole;
using minivmm::devices::VirtioMmioTransport;
using minivmm::devices::kVirtioFVersion1;
using minivmm::testing::FakeGuestRam;
using minivmm::testing::FakeIrqLine;
using minivmm::testing::FakeMmioDriver;
using minivmm::testing::FakeQueue;
using minivmm::testing::VectorSink;

constexpr std::uint64_t kTxBuf = 0x8000, kRxBuf = 0x9000;

struct Rig {
  Rig() { drv.bring_up(kVirtioFVersion1, {&rxq, &txq}); }
  std::span<const std::uint8_t> bytes(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
  }
  FakeGuestRam mem{0x10000};
  FakeQueue rxq{mem, 0x1000, 8}, txq{mem, 0x2000, 8};
  VectorSink out;
  VirtioConsole console{out};
  FakeIrqLine irq;
  VirtioMmioTransport t{console, mem.ram(), irq};
  FakeMmioDriver drv{t};
};

TEST(VirtioConsoleTest, GuestOutputReachesTheSink) {
  Rig r;
  const std::string banner = "hello from virtio\n";
  std::memcpy(r.mem.at(kTxBuf), banner.data(), banner.size());
  r.txq.add_chain(0, {{kTxBuf, 6, false}, {kTxBuf + 6, static_cast<std::uint32_t>(banner.size() - 6), false}});
  r.drv.notify(1);
  EXPECT_EQ(r.out.str(), banner);
  EXPECT_EQ(r.txq.used_idx(), 1);
  EXPECT_EQ(r.txq.used_len(0), 0u);
  EXPECT_EQ(r.console.stats().tx_bytes, banner.size());
}

TEST(VirtioConsoleTest, InputFillsPostedReceiveBuffers) {
  Rig r;
  r.rxq.add_chain(0, {{kRxBuf, 4, true}});
  r.drv.notify(0);
  EXPECT_EQ(r.console.receive(r.bytes("abcdef")), 6u);
  EXPECT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), 4u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.mem.at(kRxBuf)), 4), "abcd");
  // The rest waits for the next buffer.
  r.rxq.add_chain(1, {{kRxBuf + 0x100, 64, true}});
  r.drv.notify(0);
  EXPECT_EQ(r.rxq.used_len(1), 2u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.mem.at(kRxBuf + 0x100)), 2), "ef");
  EXPECT_EQ(r.console.stats().rx_bytes, 6u);
  EXPECT_EQ(r.irq.pulses(), 2);
}

TEST(VirtioConsoleTest, FullBufferRefusesInputAndTheHookFiresWhenTheGuestTakesSome) {
  Rig r;
  int hooks = 0;
  r.console.set_on_rx_space([&] { ++hooks; });
  const std::string big(VirtioConsole::kRxBuffer + 10, 'x');
  EXPECT_EQ(r.console.receive(r.bytes(big)), VirtioConsole::kRxBuffer);
  EXPECT_EQ(r.console.rx_space(), 0u);
  EXPECT_EQ(hooks, 0);
  r.rxq.add_chain(0, {{kRxBuf, 100, true}});
  r.drv.notify(0);
  EXPECT_EQ(hooks, 1);
  EXPECT_EQ(r.console.rx_space(), 100u);
  EXPECT_EQ(r.console.stats().rx_full, 1u);
}

TEST(VirtioConsoleTest, InputBeforeTheDriverIsBufferedNotLost) {
  FakeGuestRam mem{0x10000};
  FakeQueue rxq{mem, 0x1000, 8}, txq{mem, 0x2000, 8};
  VectorSink out;
  VirtioConsole console{out};
  FakeIrqLine irq;
  VirtioMmioTransport t{console, mem.ram(), irq};
  FakeMmioDriver drv{t};
  const std::string s = "early";
  EXPECT_EQ(console.receive({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}), 5u);
  rxq.add_chain(0, {{kRxBuf, 16, true}});  // posted before DRIVER_OK, as Linux does
  drv.bring_up(kVirtioFVersion1, {&rxq, &txq});
  EXPECT_EQ(rxq.used_idx(), 1);
  EXPECT_EQ(rxq.used_len(0), 5u);
}

TEST(VirtioConsoleTest, WritableBuffersOnTheTransmitQueueAreSkipped) {
  Rig r;
  r.txq.add_chain(0, {{kTxBuf, 16, true}});
  r.drv.notify(1);
  EXPECT_EQ(r.out.str(), "");
  EXPECT_EQ(r.txq.used_idx(), 1);
}

}  // namespace
