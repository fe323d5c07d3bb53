// VirtioConsole: guest output to the sink, host input into posted receive buffers, and the
// UART's back-pressure contract (bounded buffer, hook when room appears, nothing dropped).
#include "devices/virtio_console.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "devices/console_input.h"
#include "devices/virtio_mmio_transport.h"
#include "loop/event_loop.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
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
  // `started`: the driver has brought the device up (DRIVER_OK); false leaves that to the test.
  explicit Rig(bool started = true) {
    if (started) drv.bring_up(kVirtioFVersion1, {&rxq, &txq});
  }
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
  Rig r(false);
  EXPECT_EQ(r.console.receive(r.bytes("early")), 5u);
  r.rxq.add_chain(0, {{kRxBuf, 16, true}});  // posted before DRIVER_OK, as Linux does
  r.drv.bring_up(kVirtioFVersion1, {&r.rxq, &r.txq});
  EXPECT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), 5u);
}

TEST(VirtioConsoleTest, WritableBuffersOnTheTransmitQueueAreSkipped) {
  Rig r;
  r.txq.add_chain(0, {{kTxBuf, 16, true}});
  r.drv.notify(1);
  EXPECT_EQ(r.out.str(), "");
  EXPECT_EQ(r.txq.used_idx(), 1);
}

// ConsoleInput feeding virtio-console from a pipe: the UART's back-pressure rules carry over.
TEST(VirtioConsoleTest, ConsoleInputPausesOnAFullBufferAndResumesWhenTheGuestPostsBuffers) {
  using namespace minivmm;
  timers::MonotonicClock mono;
  timers::PollTimeoutAlarm alarm;
  timers::Dynticks dynticks{alarm, mono, {}};
  loop::EventLoop loop{loop::make_poller(loop::PollerKind::kPpoll), dynticks};
  auto pump = [&] {
    loop.schedule([] {});  // a pending bottom half makes the wait's timeout zero
    ASSERT_TRUE(loop.run_once());
  };
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Rig r;
  devices::ConsoleInputOptions options;
  options.fd = fds[0];
  auto input = std::make_unique<devices::ConsoleInput>(
      loop, static_cast<devices::ConsoleRxPort&>(r.console), [] {}, options);
  const std::string text(VirtioConsole::kRxBuffer + 44, 'k');  // 44 more than the buffer
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  for (int i = 0; i < 40 && input->watching(); ++i) pump();
  EXPECT_FALSE(input->watching());  // paused: the buffer is full and the guest posted nothing
  EXPECT_EQ(r.console.rx_space(), 0u);
  r.rxq.add_chain(0, {{kRxBuf, 512, true}});
  r.drv.notify(0);  // takes the 256 buffered bytes; the hook schedules the resume
  for (int i = 0; i < 10; ++i) pump();
  EXPECT_TRUE(input->watching());
  r.rxq.add_chain(1, {{kRxBuf + 0x400, 512, true}});
  r.drv.notify(0);
  EXPECT_EQ(r.console.stats().rx_bytes, text.size());  // nothing lost
  EXPECT_EQ(input->stats().pauses, 1u);
  EXPECT_EQ(input->stats().resumes, 1u);
  input.reset();
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
