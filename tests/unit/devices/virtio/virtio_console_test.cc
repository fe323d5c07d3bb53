// VirtioConsole: guest output to the sink, host input into posted receive buffers, and the
// UART's back-pressure contract (bounded buffer, hook when room appears, nothing dropped).
#include "devices/virtio/virtio_console.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "devices/host/console_input.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "loop/event_loop.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_virtio_driver.h"
#include "tests/support/map_report_writer.h"
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

struct ConsoleRig {
  // `started`: the driver has brought the device up (DRIVER_OK); false leaves that to the test.
  explicit ConsoleRig(bool started = true) {
    if (started) drv.bring_up(kVirtioFVersion1, {&rxq, &txq});
  }
  std::span<const std::uint8_t> bytes(const std::string& s) {
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
  }
  FakeGuestRam mem{0x40000};  // room for buffers bigger than a transmit turn
  FakeQueue rxq{mem, 0x1000, 8}, txq{mem, 0x2000, 8};
  VectorSink out;
  VirtioConsole console{out};
  FakeIrqLine irq;
  VirtioMmioTransport t{console, mem.ram(), irq};
  FakeMmioDriver drv{t};
};

TEST(VirtioConsoleTest, GuestOutputReachesTheSink) {
  ConsoleRig r;
  const std::string banner = "hello from virtio\n";
  std::memcpy(r.mem.at(kTxBuf), banner.data(), banner.size());
  r.txq.add_chain(0, {{kTxBuf, 6, false}, {kTxBuf + 6, static_cast<std::uint32_t>(banner.size() - 6), false}});
  r.drv.notify(1);
  EXPECT_EQ(r.out.str(), banner);
  EXPECT_EQ(r.txq.used_idx(), 1);
  EXPECT_EQ(r.txq.used_len(0), 0u);
  EXPECT_EQ(r.console.stats().tx_bytes, banner.size());
  EXPECT_EQ(r.out.writes(), 1);  // one sink write per turn, not one per buffer
  EXPECT_EQ(r.console.stats().tx_capped, 0u);
}

// Transmit caps. Big buffers live from kBig on; the hook only counts, so each test decides when
// the "loop" runs the next turn.
constexpr std::uint64_t kBig = 0x10000;
constexpr std::size_t kTurn = VirtioConsole::kTxBytesPerTurn;

std::string pattern(std::size_t n, int seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('!' + (i * 7 + static_cast<std::size_t>(seed)) % 90);
  return s;
}

struct CapRig : ConsoleRig {
  CapRig() : ConsoleRig(false) {
    console.set_on_tx_pending([this] { ++hooks; });
    drv.bring_up(kVirtioFVersion1 | minivmm::devices::kVirtioFIndirectDesc, {&rxq, &txq});
  }
  // Puts `text` in guest RAM at `at` and offers it as one chain of one buffer.
  void offer(std::uint16_t desc, std::uint64_t at, const std::string& text) {
    std::memcpy(mem.at(at), text.data(), text.size());
    txq.add_chain(desc, {{at, static_cast<std::uint32_t>(text.size()), false}});
  }
  int hooks = 0;
};

// 2.5 turns' worth in one buffer: three turns, each one sink write of at most a turn's bytes,
// the hook after each capped one, and the chain returned only after its last byte.
TEST(VirtioConsoleTest, AHugeBufferGoesOutInCappedTurnsInOrder) {
  CapRig r;
  const std::string text = pattern(2 * kTurn + kTurn / 2, 1);
  r.offer(0, kBig, text);
  r.drv.notify(1);
  EXPECT_EQ(r.out.str().size(), kTurn);
  EXPECT_EQ(r.hooks, 1);
  EXPECT_EQ(r.txq.used_idx(), 0);  // still being written out
  r.console.resume_transmit();
  EXPECT_EQ(r.out.str().size(), 2 * kTurn);
  EXPECT_EQ(r.hooks, 2);
  EXPECT_EQ(r.txq.used_idx(), 0);
  r.console.resume_transmit();
  EXPECT_EQ(r.out.str(), text);
  EXPECT_EQ(r.hooks, 2);  // drained: nothing more scheduled
  EXPECT_EQ(r.out.writes(), 3);
  EXPECT_EQ(r.txq.used_idx(), 1);
  const auto st = r.console.stats();
  EXPECT_EQ(st.tx_capped, 2u);
  EXPECT_EQ(st.tx_resumes, 2u);
  EXPECT_EQ(st.tx_chains, 1u);
  EXPECT_EQ(st.tx_bytes, text.size());
}

// Chains of many empty-ish buffers: the descriptor cap ends the turn between chains. 200
// one-byte buffers per chain (indirect tables), so the turn takes two chains (400 >= 256) and
// leaves the third.
TEST(VirtioConsoleTest, ManyDescriptorsStopATurnAtTheDescriptorCap) {
  CapRig r;
  constexpr std::uint32_t kPerChain = 200;
  std::string expected;
  for (std::uint16_t c = 0; c < 3; ++c) {
    const std::uint64_t data = kBig + 0x1000u * c, table = 0x20000 + 0x1000u * c;
    for (std::uint32_t i = 0; i < kPerChain; ++i) {
      *r.mem.at(data + i) = static_cast<std::byte>('a' + c);
      r.txq.write_desc(table + 16u * i, data + i, 1,
                       i + 1 < kPerChain ? minivmm::testing::kDescNext : 0,
                       static_cast<std::uint16_t>(i + 1));
    }
    r.txq.set_desc(c, table, 16 * kPerChain, minivmm::testing::kDescIndirect);
    r.txq.publish(c);
    expected += std::string(kPerChain, static_cast<char>('a' + c));
  }
  r.drv.notify(1);
  EXPECT_EQ(r.txq.used_idx(), 2);
  EXPECT_EQ(r.out.str(), expected.substr(0, 2 * kPerChain));
  EXPECT_EQ(r.out.writes(), 1);
  EXPECT_EQ(r.hooks, 1);
  r.console.resume_transmit();
  EXPECT_EQ(r.txq.used_idx(), 3);
  EXPECT_EQ(r.out.str(), expected);
  EXPECT_EQ(r.hooks, 1);
}

// The guest notifies again while the rest of a buffer waits for the loop: the notify goes on
// where the last turn stopped (the held buffer first), and the resume then finds nothing.
TEST(VirtioConsoleTest, ANotifyDuringACappedBufferContinuesItBeforeTheNextOne) {
  CapRig r;
  const std::string big = pattern(kTurn + 100, 2);
  r.offer(0, kBig, big);
  r.drv.notify(1);
  ASSERT_EQ(r.hooks, 1);
  r.offer(1, 0x8000, "tail\n");
  r.drv.notify(1);
  EXPECT_EQ(r.out.str(), big + "tail\n");
  EXPECT_EQ(r.txq.used_idx(), 2);
  EXPECT_EQ(r.txq.used_id(0), 0u);
  EXPECT_EQ(r.txq.used_id(1), 1u);
  r.console.resume_transmit();
  EXPECT_EQ(r.out.str(), big + "tail\n");
  EXPECT_EQ(r.hooks, 1);  // the second notify was not capped, nor was the resume
}

// One resume in flight at a time: capped turns on several threads' notifies schedule one.
TEST(VirtioConsoleTest, ACappedTurnWithAResumePendingSchedulesNoOther) {
  CapRig r;
  r.offer(0, kBig, pattern(3 * kTurn, 3));
  r.drv.notify(1);
  r.drv.notify(1);
  EXPECT_EQ(r.out.str().size(), 2 * kTurn);
  EXPECT_EQ(r.hooks, 1);
  EXPECT_EQ(r.console.stats().tx_capped, 2u);
  r.console.resume_transmit();  // the last third: drained, nothing scheduled
  EXPECT_EQ(r.out.str().size(), 3 * kTurn);
  EXPECT_EQ(r.hooks, 1);
}

TEST(VirtioConsoleTest, ResetDropsTheHeldBufferAndAPendingResumeDoesNothing) {
  CapRig r;
  r.offer(0, kBig, pattern(2 * kTurn, 4));
  r.drv.notify(1);
  ASSERT_EQ(r.hooks, 1);
  r.drv.write(VirtioMmioTransport::kStatus, 0);
  r.console.resume_transmit();
  EXPECT_EQ(r.out.str().size(), kTurn);
  EXPECT_EQ(r.console.stats().tx_resumes, 0u);
  // The next driver's output comes out alone, nothing of the old buffer before it.
  FakeQueue rx2{r.mem, 0x3000, 8}, tx2{r.mem, 0x4000, 8};
  r.drv.bring_up(kVirtioFVersion1, {&rx2, &tx2});
  std::memcpy(r.mem.at(0x8000), "new\n", 4);
  tx2.add_chain(0, {{0x8000, 4, false}});
  r.drv.notify(1);
  EXPECT_EQ(r.out.str().substr(kTurn), "new\n");
}

TEST(VirtioConsoleTest, WithoutAHookTheRestWaitsForTheNextNotify) {
  ConsoleRig r;
  const std::string text = pattern(kTurn + 10, 5);
  std::memcpy(r.mem.at(kBig), text.data(), text.size());
  r.txq.add_chain(0, {{kBig, static_cast<std::uint32_t>(text.size()), false}});
  r.drv.notify(1);
  EXPECT_EQ(r.out.str().size(), kTurn);
  r.drv.notify(1);
  EXPECT_EQ(r.out.str(), text);
}

// At exit the VMM drains what the loop will no longer get to.
TEST(VirtioConsoleTest, FlushTransmitWritesOutEverythingLeft) {
  CapRig r;
  const std::string a = pattern(3 * kTurn + 1, 6), b = "and the rest\n";
  r.offer(0, kBig, a);
  r.offer(1, 0x8000, b);
  r.drv.notify(1);
  r.console.flush_transmit();
  EXPECT_EQ(r.out.str(), a + b);
  EXPECT_EQ(r.txq.used_idx(), 2);
  EXPECT_EQ(r.hooks, 1);  // flushing schedules nothing
}

// A guest can describe far more output than it has RAM (indirect tables pointing at the same
// buffer again and again); the exit's flush stops after kTxFlushTurns turns.
TEST(VirtioConsoleTest, FlushTransmitIsBounded) {
  CapRig r;
  constexpr std::uint32_t kEntries = 1024;  // the largest indirect table
  constexpr std::uint64_t kTable = 0x20000;
  for (std::uint32_t i = 0; i < kEntries; ++i) {
    r.txq.write_desc(kTable + 16u * i, kBig, 0x8000,
                     i + 1 < kEntries ? minivmm::testing::kDescNext : 0,
                     static_cast<std::uint16_t>(i + 1));
  }
  r.txq.set_desc(0, kTable, 16 * kEntries, minivmm::testing::kDescIndirect);
  r.txq.publish(0);  // 1024 * 32 KiB = 32 MiB in one chain
  r.drv.notify(1);
  r.console.flush_transmit();
  EXPECT_EQ(r.out.str().size(), (1 + VirtioConsole::kTxFlushTurns) * kTurn);
  EXPECT_EQ(r.txq.used_idx(), 0);  // still held: dropped by the reset that follows an exit
}

TEST(VirtioConsoleTest, InputFillsPostedReceiveBuffers) {
  ConsoleRig r;
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
  ConsoleRig r;
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
  ConsoleRig r(false);
  EXPECT_EQ(r.console.receive(r.bytes("early")), 5u);
  r.rxq.add_chain(0, {{kRxBuf, 16, true}});  // posted before DRIVER_OK, as Linux does
  r.drv.bring_up(kVirtioFVersion1, {&r.rxq, &r.txq});
  EXPECT_EQ(r.rxq.used_idx(), 1);
  EXPECT_EQ(r.rxq.used_len(0), 5u);
}

TEST(VirtioConsoleTest, WritableBuffersOnTheTransmitQueueAreSkipped) {
  ConsoleRig r;
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
  ConsoleRig r;
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

// The console's part of its report object: "data", the port's traffic, as --stats always had.
TEST(VirtioConsoleTest, ReportsItsTrafficAsData) {
  ConsoleRig r;
  const std::string line = "ok\n";
  std::memcpy(r.mem.at(kTxBuf), line.data(), line.size());
  r.txq.add_chain(0, {{kTxBuf, static_cast<std::uint32_t>(line.size()), false}});
  r.drv.notify(1);
  minivmm::testing::MapReportWriter report;
  r.console.report(report);
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"data object", "data/rx_bytes number",
                                   "data/rx_chains number", "data/rx_full number",
                                   "data/tx_bytes number", "data/tx_capped number",
                                   "data/tx_chains number", "data/tx_resumes number"}));
  EXPECT_EQ(report.counter("data/tx_bytes"), line.size());
  EXPECT_EQ(report.counter("data/tx_chains"), 1u);
}

}  // namespace
