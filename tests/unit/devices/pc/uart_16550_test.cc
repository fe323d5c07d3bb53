#include "devices/pc/uart_16550.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "devices/host/console_input.h"
#include "devices/host/stdout_sink.h"
#include "loop/event_loop.h"
#include "loop/poller.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/map_report_writer.h"
#include "tests/support/time_driver.h"
#include "tests/support/vector_sink.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer_list.h"

namespace minivmm::devices {
namespace {

using namespace std::chrono_literals;

// Offsets and bits, spelled out here so the tests read like the data sheet.
constexpr std::uint16_t kThr = 0, kRbr = 0, kDll = 0, kIer = 1, kDlm = 1, kIir = 2, kFcr = 2,
                        kLcr = 3, kMcr = 4, kLsr = 5, kMsr = 6, kScr = 7;
constexpr std::uint8_t kIerRdi = 0x01, kIerThri = 0x02, kIerRlsi = 0x04, kIerMsi = 0x08;
constexpr std::uint8_t kIirNone = 0x01, kIirThre = 0x02, kIirRda = 0x04, kIirRls = 0x06,
                       kIirTimeout = 0x0c, kIirModem = 0x00, kIirFifo = 0xc0;
constexpr std::uint8_t kMcrDtr = 0x01, kMcrRts = 0x02, kMcrOut1 = 0x04, kMcrOut2 = 0x08,
                       kMcrLoop = 0x10;
constexpr std::uint8_t kLsrDr = 0x01, kLsrOe = 0x02, kLsrThre = 0x20, kLsrTemt = 0x40;
constexpr std::uint8_t kFcrEnable = 0x01, kFcrClearRx = 0x02, kFcrClearTx = 0x04;
constexpr std::uint8_t kLcrDlab = 0x80, kLcr8n1 = 0x03;

class Uart16550Test : public ::testing::Test {
 protected:
  std::uint8_t in(std::uint16_t offset) {
    std::uint8_t v = 0;
    uart_.read(offset, std::span<std::uint8_t>(&v, 1));
    return v;
  }
  void out(std::uint16_t offset, std::uint8_t v) {
    uart_.write(offset, std::span<const std::uint8_t>(&v, 1));
  }
  void out(std::string_view text) {
    for (char c : text) out(kThr, static_cast<std::uint8_t>(c));
  }
  std::size_t receive(std::string_view text) {
    return uart_.receive(std::span<const std::uint8_t>(
        reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  }

  // Runs the due timers of both lists, as the loop would.
  void advance(timers::Nanos by) { testing::advance(clock_, {&rt_, &vm_}, by); }

  testing::FakeClock clock_;
  timers::TimerList rt_{timers::ClockType::kRt, clock_};
  timers::TimerList vm_{timers::ClockType::kVm, clock_};
  testing::FakeIrqLine irq_;
  testing::VectorSink sink_;
  Uart16550 uart_{irq_, sink_, &rt_, &vm_};
};

TEST_F(Uart16550Test, ResetStateIsIdleWithEmptyTransmitter) {
  EXPECT_EQ(in(kIir), kIirNone);
  EXPECT_EQ(in(kLsr), kLsrThre | kLsrTemt);
  EXPECT_EQ(in(kIer), 0);
  EXPECT_FALSE(irq_.level());
}

TEST_F(Uart16550Test, DlabMapsOffsetsZeroAndOneToTheDivisorLatch) {
  out(kIer, kIerRdi);
  out(kLcr, kLcrDlab | kLcr8n1);
  out(kDll, 0x01);  // 115200 baud
  out(kDlm, 0x02);
  EXPECT_EQ(in(kDll), 0x01);
  EXPECT_EQ(in(kDlm), 0x02);
  EXPECT_EQ(sink_.str(), "");  // the DLL write was not a THR write

  out(kLcr, kLcr8n1);
  EXPECT_EQ(in(kIer), kIerRdi);  // IER was not overwritten by the DLM write
  EXPECT_EQ(in(kLcr), kLcr8n1);
  out(kLcr, kLcrDlab | kLcr8n1);
  EXPECT_EQ(in(kDll), 0x01);
  EXPECT_EQ(in(kDlm), 0x02);
}

TEST_F(Uart16550Test, IerKeepsOnlyTheFourEnableBits) {
  out(kIer, 0xff);
  EXPECT_EQ(in(kIer), 0x0f);
}

TEST_F(Uart16550Test, ScratchRegisterKeepsItsValue) {
  out(kScr, 0x5a);
  EXPECT_EQ(in(kScr), 0x5a);
  out(kScr, 0xa5);
  EXPECT_EQ(in(kScr), 0xa5);
}

TEST_F(Uart16550Test, ThreInterruptOnEnableClearedByIirReadAndRaisedByThrWrite) {
  out(kMcr, kMcrOut2);
  out(kIer, kIerThri);
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(in(kIir), kIirThre);  // reporting it acknowledges it
  EXPECT_FALSE(irq_.level());
  EXPECT_EQ(in(kIir), kIirNone);

  out(kThr, 'a');  // transmitted at once: THR is empty again
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(in(kIir), kIirThre);
  EXPECT_FALSE(irq_.level());

  out(kThr, 'b');
  out(kIer, 0);  // disabling the source lowers the line
  EXPECT_FALSE(irq_.level());
}

TEST_F(Uart16550Test, IrqIsGatedByOut2) {
  out(kIer, kIerThri);
  EXPECT_FALSE(irq_.level());
  out(kMcr, kMcrOut2);
  EXPECT_TRUE(irq_.level());
  out(kMcr, 0);
  EXPECT_FALSE(irq_.level());
  // Only changes reach the line.
  EXPECT_EQ(irq_.levels(), (std::vector<bool>{true, false}));
}

TEST_F(Uart16550Test, InterruptPrioritiesAreLineStatusThenDataThenThreThenModem) {
  // Loopback is the guest's only way to overrun the FIFO (receive() applies back-pressure).
  out(kFcr, kFcrEnable | 0xc0);  // trigger level 14
  out(kMcr, kMcrLoop | kMcrOut2);
  out(std::string(17, 'x'));  // 16 fit, the 17th overruns
  out(kIer, kIerRdi | kIerThri | kIerRlsi | kIerMsi);
  out(kMcr, kMcrLoop | kMcrOut2 | kMcrRts);  // CTS changes: a modem status delta

  EXPECT_EQ(in(kIir), kIirFifo | kIirRls);
  EXPECT_EQ(in(kIir), kIirFifo | kIirRls);  // still: only reading LSR clears it
  EXPECT_EQ(in(kLsr)&kLsrOe, kLsrOe);
  EXPECT_EQ(in(kIir), kIirFifo | kIirRda);
  for (int i = 0; i < 16; ++i) in(kRbr);
  EXPECT_EQ(in(kIir), kIirFifo | kIirThre);  // reported, hence acknowledged
  EXPECT_EQ(in(kIir), kIirFifo | kIirModem);
  in(kMsr);
  EXPECT_EQ(in(kIir), kIirFifo | kIirNone);
  // Loopback forces the OUT2 pin inactive: none of this reached the PIC.
  EXPECT_EQ(irq_.rising_edges(), 0);
}

TEST_F(Uart16550Test, ThreStaysPendingWhileAHigherPriorityInterruptIsReported) {
  out(kMcr, kMcrOut2);
  out(kFcr, kFcrEnable);
  receive("a");
  out(kIer, kIerRdi | kIerThri);
  EXPECT_EQ(in(kIir), kIirFifo | kIirRda);  // THRE hidden, so not acknowledged
  in(kRbr);
  EXPECT_EQ(in(kIir), kIirFifo | kIirThre);
  EXPECT_EQ(in(kIir), kIirFifo | kIirNone);
  EXPECT_FALSE(irq_.level());
}

TEST_F(Uart16550Test, FifoTriggerLevelsSeparateDataAvailableFromTimeout) {
  out(kMcr, kMcrOut2);
  out(kIer, kIerRdi);
  const timers::Nanos timeout = uart_.rx_timeout_delay();
  struct Case {
    std::uint8_t fcr_bits;
    std::size_t level;
  };
  for (const Case c : {Case{0x00, 1}, Case{0x40, 4}, Case{0x80, 8}, Case{0xc0, 14}}) {
    SCOPED_TRACE(c.level);
    out(kFcr, kFcrEnable | kFcrClearRx | c.fcr_bits);
    EXPECT_EQ(in(kIir), kIirFifo | kIirNone);
    if (c.level > 1) {
      // Below the trigger the receiver is silent until the character timeout.
      EXPECT_EQ(receive(std::string(c.level - 1, 'a')), c.level - 1);
      EXPECT_EQ(in(kIir), kIirFifo | kIirNone);
      EXPECT_FALSE(irq_.level());
      advance(timeout);
      EXPECT_EQ(in(kIir), kIirFifo | kIirTimeout);
      EXPECT_TRUE(irq_.level());
    }
    // Reaching the trigger level reports received data at once.
    receive("b");
    EXPECT_EQ(in(kIir), kIirFifo | kIirRda);
    EXPECT_TRUE(irq_.level());
  }
  out(kFcr, kFcrEnable | kFcrClearRx);
  EXPECT_FALSE(irq_.level());
}

// PC16550D "FIFO Interrupt Mode Operation": a timeout interrupt occurs when at least one
// character is in the FIFO and none has been removed or input in the last four character times.
TEST_F(Uart16550Test, CharacterTimeoutComesOnlyAfterFourCharacterTimes) {
  out(kLcr, kLcrDlab);
  out(kDll, 1);  // 115200 baud
  out(kDlm, 0);
  out(kLcr, kLcr8n1);
  out(kMcr, kMcrOut2);
  out(kIer, kIerRdi);
  out(kFcr, kFcrEnable | kFcrClearRx | 0xc0);  // trigger at 14
  // 8N1 is ten bits a character: 4 x 10 / 115200 s.
  EXPECT_EQ(uart_.rx_timeout_delay(), timers::Nanos{347'222});

  receive("hi");
  // Right after the bytes arrive: no interrupt, IIR 0xC1 (the probe that found this bug).
  EXPECT_EQ(in(kIir), 0xc1);
  EXPECT_FALSE(irq_.level());
  advance(timers::Nanos{347'221});
  EXPECT_EQ(in(kIir), 0xc1);
  EXPECT_FALSE(irq_.level());
  advance(timers::Nanos{1});
  EXPECT_EQ(in(kIir), 0xcc);
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(uart_.stats().rx_timeouts, 1u);
  // Reading IIR does not clear it; reading a character does, and restarts the count.
  EXPECT_EQ(in(kIir), 0xcc);
  EXPECT_EQ(in(kRbr), 'h');
  EXPECT_EQ(in(kIir), 0xc1);
  EXPECT_FALSE(irq_.level());
  advance(timers::Nanos{347'222});
  EXPECT_EQ(in(kIir), 0xcc);
  EXPECT_EQ(in(kRbr), 'i');
  // An empty FIFO never times out.
  advance(10ms);
  EXPECT_EQ(in(kIir), 0xc1);
  EXPECT_FALSE(vm_.next_deadline().has_value());
  EXPECT_EQ(uart_.stats().rx_timeouts, 2u);
}

TEST_F(Uart16550Test, NewCharactersRestartTheTimeoutCount) {
  out(kIer, kIerRdi);
  out(kFcr, kFcrEnable | 0x80);  // trigger at 8
  const timers::Nanos timeout = uart_.rx_timeout_delay();
  receive("a");
  advance(timeout - timers::Nanos{1000});
  receive("b");
  advance(timeout - timers::Nanos{1000});
  EXPECT_EQ(in(kIir), kIirFifo | kIirNone);  // each byte restarted the count
  advance(timers::Nanos{1000});
  EXPECT_EQ(in(kIir), kIirFifo | kIirTimeout);
  // Data arriving while the timeout is indicated clears it and starts a new count.
  receive("c");
  EXPECT_EQ(in(kIir), kIirFifo | kIirNone);
  advance(timeout);
  EXPECT_EQ(in(kIir), kIirFifo | kIirTimeout);
}

TEST_F(Uart16550Test, CharacterTimeFollowsDivisorAndFraming) {
  const auto set_line = [this](std::uint16_t divisor, std::uint8_t lcr) {
    out(kLcr, kLcrDlab);
    out(kDll, static_cast<std::uint8_t>(divisor & 0xff));
    out(kDlm, static_cast<std::uint8_t>(divisor >> 8));
    out(kLcr, lcr);
  };
  // 9600 baud, 7 data bits, even parity, 1 stop: 10 bits a character.
  set_line(12, 0x1a);
  EXPECT_EQ(uart_.rx_timeout_delay(), timers::Nanos{4'166'666});
  // 5 data bits with "2" stop bits means 1.5: 7.5 bits a character, at 115200.
  set_line(1, 0x04);
  EXPECT_EQ(uart_.rx_timeout_delay(), timers::Nanos{260'416});
  // 8 data bits, parity, 2 stop bits: 12 bits.
  set_line(1, 0x0f);
  EXPECT_EQ(uart_.rx_timeout_delay(), timers::Nanos{416'666});
  // Divisor 0 counts 65536 in the 16-bit baud generator: the slowest rate, not a division by 0.
  set_line(0, kLcr8n1);
  EXPECT_EQ(uart_.rx_timeout_delay(), timers::Nanos{22'755'555'555});
}

TEST_F(Uart16550Test, NoTimeoutWithoutFifoOrAfterAClear) {
  out(kIer, kIerRdi);
  // 16450 mode: the holding register reports data at once and nothing is timed.
  receive("x");
  EXPECT_EQ(in(kIir), kIirRda);
  EXPECT_FALSE(vm_.next_deadline().has_value());
  in(kRbr);
  out(kFcr, kFcrEnable | 0x40);
  receive("ab");
  EXPECT_TRUE(vm_.next_deadline().has_value());
  out(kFcr, kFcrEnable | kFcrClearRx | 0x40);
  EXPECT_FALSE(vm_.next_deadline().has_value());
  advance(1s);
  EXPECT_EQ(in(kIir), kIirFifo | kIirNone);
  EXPECT_EQ(uart_.stats().rx_timeouts, 0u);
}

TEST_F(Uart16550Test, LoopedBackBytesTimeOutToo) {
  out(kMcr, kMcrLoop);
  out(kIer, kIerRdi);
  out(kFcr, kFcrEnable | 0xc0);
  out(kThr, 'z');
  EXPECT_EQ(in(kIir), kIirFifo | kIirNone);
  advance(uart_.rx_timeout_delay());
  EXPECT_EQ(in(kIir), kIirFifo | kIirTimeout);
  EXPECT_FALSE(irq_.level());  // loopback gates the pin off
}

TEST_F(Uart16550Test, FifoClearAndDisableEmptyTheReceiver) {
  out(kFcr, kFcrEnable);
  receive("abc");
  EXPECT_EQ(in(kLsr)&kLsrDr, kLsrDr);
  out(kFcr, kFcrEnable | kFcrClearRx | kFcrClearTx);
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(uart_.rx_space(), Uart16550::kFifoSize);

  receive("abc");
  out(kFcr, 0);  // back to 16450 mode: both FIFOs are emptied
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(in(kIir), kIirNone);    // no FIFO bits
  EXPECT_EQ(uart_.rx_space(), 1u);  // one holding register
}

TEST_F(Uart16550Test, WithoutFifoTheHoldingRegisterTakesOneByte) {
  EXPECT_EQ(receive("ab"), 1u);
  EXPECT_EQ(in(kRbr), 'a');
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(in(kRbr), 'a');  // RBR keeps the last byte
}

TEST_F(Uart16550Test, RxOverflowSetsOverrunUntilLsrIsRead) {
  out(kFcr, kFcrEnable);
  out(kMcr, kMcrLoop);
  out(std::string(16, 'a') + "b");
  EXPECT_EQ(in(kLsr), kLsrDr | kLsrOe | kLsrThre | kLsrTemt);
  EXPECT_EQ(in(kLsr), kLsrDr | kLsrThre | kLsrTemt);
  EXPECT_EQ(uart_.stats().rx_overruns, 1u);
  std::string got;
  while (in(kLsr)&kLsrDr) got.push_back(static_cast<char>(in(kRbr)));
  EXPECT_EQ(got, std::string(16, 'a'));  // the FIFO kept its bytes, the new one was lost
}

TEST_F(Uart16550Test, LoopbackSendsThrToTheReceiverAndMirrorsMcrInMsr) {
  EXPECT_EQ(in(kMsr), 0xb0);  // DCD, DSR, CTS of an attached terminal
  out(kMcr, kMcrLoop);
  // All four inputs now follow the (clear) outputs: DCD, DSR, CTS fell.
  EXPECT_EQ(in(kMsr), 0x0b);
  out(kMcr, kMcrLoop | kMcrDtr | kMcrRts | kMcrOut1 | kMcrOut2);
  EXPECT_EQ(in(kMsr), 0xf0 | 0x0b);  // CTS, DSR, RI, DCD; deltas of CTS, DSR, DCD
  out(kMcr, kMcrLoop | kMcrDtr | kMcrRts | kMcrOut2);
  EXPECT_EQ(in(kMsr), 0xb0 | 0x04);  // RI fell: trailing-edge RI
  EXPECT_EQ(in(kMsr), 0xb0);         // deltas clear on read

  out(kFcr, kFcrEnable);
  out("hi");
  EXPECT_EQ(sink_.str(), "");
  uart_.flush();
  EXPECT_EQ(sink_.str(), "");
  EXPECT_EQ(in(kRbr), 'h');
  EXPECT_EQ(in(kRbr), 'i');
  EXPECT_EQ(receive("x"), 0u);  // the line input is disconnected in loopback
  EXPECT_EQ(uart_.stats().bytes_out, 0u);

  out(kMcr, kMcrOut2);
  out("ok\n");
  EXPECT_EQ(sink_.str(), "ok\n");
}

TEST_F(Uart16550Test, ModemStatusInterrupt) {
  out(kMcr, kMcrOut2);
  out(kIer, kIerMsi);
  EXPECT_FALSE(irq_.level());
  out(kMcr, kMcrOut2 | kMcrLoop);  // inputs change (interrupt pending, but the pin is gated)
  EXPECT_EQ(in(kIir), kIirModem);
  out(kMcr, kMcrOut2);  // inputs change back; the pin is live again
  EXPECT_TRUE(irq_.level());
  in(kMsr);
  EXPECT_FALSE(irq_.level());
}

TEST_F(Uart16550Test, BurstWithoutNewlineIsOneWriteWhenTheFlushTimerFires) {
  out(std::string(100, 'x'));
  EXPECT_EQ(sink_.writes(), 0);
  testing::advance(clock_, rt_, Uart16550::kFlushDelay - 1ns);
  EXPECT_EQ(sink_.writes(), 0);
  testing::advance(clock_, rt_, 1ns);
  EXPECT_EQ(sink_.writes(), 1);
  EXPECT_EQ(sink_.str(), std::string(100, 'x'));
  EXPECT_EQ(uart_.stats().bytes_out, 100u);
  EXPECT_EQ(uart_.stats().sink_writes, 1u);
}

TEST_F(Uart16550Test, LineIsOneWriteWithNoTimerLeftArmed) {
  out("hello, world\n");
  EXPECT_EQ(sink_.writes(), 1);
  EXPECT_EQ(sink_.str(), "hello, world\n");
  EXPECT_FALSE(rt_.next_deadline().has_value());
}

TEST_F(Uart16550Test, FullBatchIsWrittenWithoutWaiting) {
  out(std::string(600, 'y'));
  EXPECT_EQ(sink_.writes(), 2);  // 256 + 256
  testing::advance(clock_, rt_, Uart16550::kFlushDelay);
  EXPECT_EQ(sink_.writes(), 3);  // the last 88
  EXPECT_EQ(sink_.str().size(), 600u);
}

TEST_F(Uart16550Test, FlushWritesWhatIsBatched) {
  out("prompt> ");
  uart_.flush();
  EXPECT_EQ(sink_.str(), "prompt> ");
  EXPECT_EQ(sink_.writes(), 1);
  uart_.flush();  // nothing left: no empty write
  EXPECT_EQ(sink_.writes(), 1);
}

TEST(Uart16550NoTimerTest, EveryByteIsWrittenAtOnceWithoutTimers) {
  testing::FakeIrqLine irq;
  testing::VectorSink sink;
  Uart16550 uart(irq, sink);
  for (char c : std::string("abc")) {
    const auto b = static_cast<std::uint8_t>(c);
    uart.write(0, std::span<const std::uint8_t>(&b, 1));
  }
  EXPECT_EQ(sink.writes(), 3);
  EXPECT_EQ(sink.str(), "abc");
}

TEST(Uart16550NoTimerTest, DestructionFlushesBatchedOutput) {
  testing::FakeClock clock;
  timers::TimerList rt(timers::ClockType::kRt, clock);
  testing::FakeIrqLine irq;
  testing::VectorSink sink;
  {
    Uart16550 uart(irq, sink, &rt);
    const std::uint8_t b = 'z';
    uart.write(0, std::span<const std::uint8_t>(&b, 1));
  }
  EXPECT_EQ(sink.str(), "z");
  EXPECT_FALSE(rt.next_deadline().has_value());
}

TEST_F(Uart16550Test, ReceiveAppliesBackPressureAndSignalsSpace) {
  int hooks = 0;
  uart_.set_on_rx_space([&] { ++hooks; });
  out(kFcr, kFcrEnable);
  EXPECT_EQ(receive("0123456789abcdefghij"), 16u);  // 20 offered
  EXPECT_EQ(uart_.rx_space(), 0u);
  EXPECT_EQ(uart_.stats().rx_overruns, 0u);
  EXPECT_EQ(hooks, 0);
  EXPECT_EQ(in(kRbr), '0');
  EXPECT_EQ(hooks, 1);  // once, not per byte
  EXPECT_EQ(in(kRbr), '1');
  EXPECT_EQ(hooks, 1);
  EXPECT_EQ(receive("ghij"), 2u);
  EXPECT_EQ(uart_.stats().bytes_in, 18u);
}

TEST_F(Uart16550Test, WideAndOutOfRangeAccessesAreSplitAndCounted) {
  out(kScr, 0x42);
  std::array<std::uint8_t, 4> data{};
  uart_.read(kMsr, data);  // MSR, SCR, then two bytes past the device
  EXPECT_EQ(data[1], 0x42);
  EXPECT_EQ(data[2], 0xff);
  EXPECT_EQ(data[3], 0xff);
  const std::uint8_t b = 1;
  uart_.write(9, std::span<const std::uint8_t>(&b, 1));
  EXPECT_EQ(uart_.stats().bad_accesses, 2u);
}

// Random register traffic must never crash, and the line must always match IIR and the gate.
TEST_F(Uart16550Test, RandomAccessSweepKeepsIrqConsistentWithIir) {
  std::mt19937 rng(20261129);  // fixed seed: reproducible
  constexpr std::array<std::size_t, 3> kWidths = {1, 2, 4};
  for (int i = 0; i < 200'000; ++i) {
    const auto offset = static_cast<std::uint16_t>(rng() % 8);
    const std::size_t width = kWidths[rng() % kWidths.size()];
    std::array<std::uint8_t, 4> data{};
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    switch (rng() % 5) {
      case 0:
        uart_.read(offset, std::span<std::uint8_t>(data.data(), width));
        break;
      case 1:
        uart_.receive(std::span<const std::uint8_t>(data.data(), width));
        break;
      case 2:
        advance(timers::Nanos{rng() % 2'000'000});
        break;
      default:
        uart_.write(offset, std::span<const std::uint8_t>(data.data(), width));
        break;
    }
    const bool level = irq_.level();
    const std::uint8_t mcr = in(kMcr);
    const std::uint8_t iir = in(kIir);
    const bool pending = (iir & 0x01) == 0;
    const bool gate = (mcr & kMcrOut2) && !(mcr & kMcrLoop);
    ASSERT_EQ(level, pending && gate) << "step " << i << " iir " << int{iir} << " mcr " << int{mcr};
  }
  // set_level is called only on changes, so the recorded levels alternate.
  const std::vector<bool> levels = irq_.levels();
  for (std::size_t i = 1; i < levels.size(); ++i) ASSERT_NE(levels[i], levels[i - 1]);
}

// vCPU threads and the host side at once: every byte arrives exactly once (run
// under -fsanitize=thread for races).
TEST_F(Uart16550Test, ConcurrentGuestAndHostAccessLosesNothing) {
  out(kFcr, kFcrEnable);
  out(kMcr, kMcrOut2);
  out(kIer, kIerRdi | kIerThri);
  constexpr int kLines = 2000;
  const auto writer = [this](char tag) {
    for (int i = 0; i < kLines; ++i) {
      const std::string line = std::string(1, tag) + "\n";
      for (char c : line) {
        const auto b = static_cast<std::uint8_t>(c);
        uart_.write(kThr, std::span<const std::uint8_t>(&b, 1));
      }
      std::uint8_t iir = 0;
      uart_.read(kIir, std::span<std::uint8_t>(&iir, 1));
    }
  };
  std::thread a(writer, 'a');
  std::thread b(writer, 'b');
  std::size_t received = 0;
  std::thread host([&] {
    const std::uint8_t byte = 'k';
    while (received < 1000) {
      received += uart_.receive(std::span<const std::uint8_t>(&byte, 1));
      uart_.flush();
    }
  });
  std::size_t drained = 0;
  while (drained < 1000) {
    if (in(kLsr)&kLsrDr) {
      in(kRbr);
      ++drained;
    }
  }
  a.join();
  b.join();
  host.join();
  uart_.flush();
  const std::string text = sink_.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), 'a'), kLines);
  EXPECT_EQ(std::count(text.begin(), text.end(), 'b'), kLines);
  EXPECT_EQ(uart_.stats().rx_overruns, 0u);
}

// ConsoleInput over a pipe (not a TTY), with a real event loop and zero-timeout passes.
class ConsoleInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe2(fds_, O_CLOEXEC), 0);
    out(kFcr, kFcrEnable);  // as Linux does; without it the receiver holds one byte
  }
  void TearDown() override {
    input_.reset();
    if (fds_[0] >= 0) ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }

  void start(bool escape = true) {
    ConsoleInputOptions options;
    options.fd = fds_[0];
    options.interactive = true;  // a pipe is no TTY: raw mode must still not be attempted
    options.escape = escape;
    input_ = std::make_unique<ConsoleInput>(
        loop_, uart_, [this] { ++quits_; }, options);
  }
  void feed(std::string_view text) {
    ASSERT_EQ(::write(fds_[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  // One loop pass that never blocks: a pending bottom half makes the wait's timeout zero.
  void pump() {
    loop_.schedule([] {});
    ASSERT_TRUE(loop_.run_once());
  }
  std::uint8_t in(std::uint16_t offset) {
    std::uint8_t v = 0;
    uart_.read(offset, std::span<std::uint8_t>(&v, 1));
    return v;
  }
  void out(std::uint16_t offset, std::uint8_t v) {
    uart_.write(offset, std::span<const std::uint8_t>(&v, 1));
  }
  std::string drain() {
    std::string got;
    while (in(kLsr)&kLsrDr) got.push_back(static_cast<char>(in(kRbr)));
    return got;
  }

  timers::MonotonicClock mono_;
  timers::PollTimeoutAlarm alarm_;
  timers::Dynticks dynticks_{alarm_, mono_, {}};
  loop::EventLoop loop_{loop::make_poller(loop::PollerKind::kPpoll), dynticks_};
  testing::FakeIrqLine irq_;
  testing::VectorSink sink_;
  Uart16550 uart_{irq_, sink_};
  int fds_[2] = {-1, -1};
  int quits_ = 0;
  std::unique_ptr<ConsoleInput> input_;
};

TEST_F(ConsoleInputTest, BytesReachTheFifo) {
  start();
  EXPECT_FALSE(input_->raw_mode());
  feed("ls\r");
  pump();
  EXPECT_EQ(drain(), "ls\r");
  EXPECT_EQ(uart_.stats().bytes_in, 3u);
}

TEST_F(ConsoleInputTest, ReadingStopsWhenTheFifoIsFullAndResumesAfterTheGuestDrainsIt) {
  start();
  feed("0123456789abcdefghij");  // 20 bytes for a 16-byte FIFO
  pump();
  EXPECT_EQ(uart_.rx_space(), 0u);
  pump();  // still readable, but the fd is no longer watched
  EXPECT_FALSE(input_->watching());
  const auto reads = input_->stats().reads;
  pump();
  EXPECT_EQ(input_->stats().reads, reads);  // no spinning on a full FIFO

  EXPECT_EQ(drain(), "0123456789abcdef");
  pump();  // the UART's hook scheduled the resume; it runs, and the fd is read again
  EXPECT_TRUE(input_->watching());
  pump();
  EXPECT_EQ(drain(), "ghij");
  EXPECT_EQ(input_->stats().pauses, 1u);
  EXPECT_EQ(input_->stats().resumes, 1u);
}

TEST_F(ConsoleInputTest, EofStopsWatching) {
  start();
  feed("bye");
  ::close(fds_[1]);
  fds_[1] = -1;
  pump();
  pump();
  EXPECT_TRUE(input_->at_eof());
  EXPECT_FALSE(input_->watching());
  const auto reads = input_->stats().reads;
  pump();
  EXPECT_EQ(input_->stats().reads, reads);
  EXPECT_EQ(drain(), "bye");
}

TEST_F(ConsoleInputTest, CtrlAThenXRequestsQuit) {
  start();
  feed("a\x01xb");
  pump();
  EXPECT_EQ(quits_, 1);
  EXPECT_EQ(drain(), "ab");
}

TEST_F(ConsoleInputTest, CtrlATwiceSendsOneCtrlAAndOtherKeysPassThrough) {
  start();
  feed("\x01\x01");
  pump();
  EXPECT_EQ(drain(), "\x01");
  feed("\x01");  // an escape split across reads
  pump();
  feed("q");
  pump();
  EXPECT_EQ(drain(), "\x01q");
  EXPECT_EQ(quits_, 0);
}

TEST_F(ConsoleInputTest, WithoutEscapeCtrlAIsData) {
  start(/*escape=*/false);
  feed("\x01x");
  pump();
  EXPECT_EQ(drain(), "\x01x");
  EXPECT_EQ(quits_, 0);
}

TEST_F(ConsoleInputTest, RestoreTerminalWithoutRawModeIsHarmless) {
  start();
  ConsoleInput::restore_terminal();
  input_.reset();
  SUCCEED();
}

// epoll refuses regular files (stdin redirected from a file) and /dev/null (CI's empty input):
// the console then reads from bottom halves, still paced by the FIFO.
TEST(ConsoleInputEpollTest, RegularFileIsReadFromBottomHalves) {
  timers::MonotonicClock mono;
  timers::PollTimeoutAlarm alarm;
  timers::Dynticks dynticks(alarm, mono, {});
  loop::EventLoop loop(loop::make_poller(loop::PollerKind::kEpoll), dynticks);
  testing::FakeIrqLine irq;
  testing::VectorSink sink;
  Uart16550 uart(irq, sink);
  const std::uint8_t fifo_on = kFcrEnable;
  uart.write(kFcr, std::span<const std::uint8_t>(&fifo_on, 1));

  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  const std::string text = "0123456789abcdefghij";  // more than the FIFO holds
  ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), file), text.size());
  std::fflush(file);
  std::rewind(file);

  ConsoleInputOptions options;
  options.fd = fileno(file);
  ConsoleInput input(loop, uart, nullptr, options);
  std::string got;
  const auto drain = [&] {
    std::uint8_t v = 0;
    for (;;) {
      uart.read(kLsr, std::span<std::uint8_t>(&v, 1));
      if (!(v & kLsrDr)) break;
      uart.read(kRbr, std::span<std::uint8_t>(&v, 1));
      got.push_back(static_cast<char>(v));
    }
  };
  for (int i = 0; i < 10 && !input.at_eof(); ++i) {
    loop.schedule([] {});
    ASSERT_TRUE(loop.run_once());
    drain();
  }
  EXPECT_EQ(got, text);
  EXPECT_TRUE(input.at_eof());
  EXPECT_FALSE(input.watching());
  std::fclose(file);
}

TEST(ConsoleInputEpollTest, UnwatchableFdGivesNoInputAndDoesNotThrow) {
  timers::MonotonicClock mono;
  timers::PollTimeoutAlarm alarm;
  timers::Dynticks dynticks(alarm, mono, {});
  loop::EventLoop loop(loop::make_poller(loop::PollerKind::kEpoll), dynticks);
  testing::FakeIrqLine irq;
  testing::VectorSink sink;
  Uart16550 uart(irq, sink);
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  ::close(fds[0]);
  ::close(fds[1]);
  ConsoleInputOptions options;
  options.fd = fds[0];  // closed, as stdin may be
  ConsoleInput input(loop, uart, nullptr, options);
  EXPECT_TRUE(input.at_eof());
  EXPECT_FALSE(input.watching());
}

TEST(StdoutSinkTest, WritesEverythingToTheFd) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  StdoutSink sink(fds[1]);
  const std::string text = "boot: ok\n";
  sink.write(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()),
                                           text.size()));
  std::string got(text.size(), '\0');
  ASSERT_EQ(::read(fds[0], got.data(), got.size()), static_cast<ssize_t>(text.size()));
  EXPECT_EQ(got, text);
  EXPECT_EQ(sink.stats().bytes, text.size());
  EXPECT_EQ(sink.stats().writes, 1u);
  ::close(fds[0]);
  // The VMM ignores SIGPIPE (a console piped into `head` must not kill the guest); so does this
  // test, to see the sink survive EPIPE.
  const auto old_handler = std::signal(SIGPIPE, SIG_IGN);
  sink.write(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()),
                                           text.size()));  // EPIPE: dropped, counted
  EXPECT_EQ(sink.stats().dropped_bytes, text.size());
  EXPECT_EQ(sink.stats().errors, 1u);
  std::signal(SIGPIPE, old_handler);
  ::close(fds[1]);
}

// The run report's "uart" object: the keys and types --stats always had.
TEST_F(Uart16550Test, ReportsItsCountersUnderUart) {
  out("hi\n");
  const std::uint8_t wide[2] = {0, 0};
  uart_.write(kScr, wide);  // wider than a byte: counted
  testing::MapReportWriter report;
  uart_.report(report);
  EXPECT_EQ(uart_.report_key(), "uart");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"bad_accesses number", "bytes_in number", "bytes_out number",
                                   "rx_overruns number", "rx_timeouts number",
                                   "sink_writes number"}));
  EXPECT_EQ(report.counter("bytes_out"), 3u);
  EXPECT_EQ(report.counter("bad_accesses"), 1u);
}

}  // namespace
}  // namespace minivmm::devices
