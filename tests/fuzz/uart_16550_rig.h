// The 16550 UART (COM1).
//
// Config byte bit 0: batched output on rt_clock (the VMM's setup), else unbatched.
// Host op: receive() of arg % 5 bytes taken from the value (host console input).
//
// Checks:
// - IRQ4 is driven by set_level() only on a change and only from a port access or a host call
//   (the flush timer must not touch it); at the start of each IIR read the line's level is what
//   IIR reports: asserted iff an interrupt is pending and MCR has OUT2 set and LOOP clear. IIR's
//   FIFO bits follow FCR bit 0; the character timeout ID appears only with the FIFO on.
// - LSR always shows THRE and TEMT (transmission is instantaneous) and never PE/FE/BI/FIFO error.
// - Output is bounded by input: the sink never gets more bytes than THR writes, at most kTxBatch
//   per write, lags bytes_out by at most one batch, and equals it after flush().
// - receive() takes exactly min(offered, rx_space()); the rx-space hook runs only on a guest
//   access and without the UART lock (it calls rx_space(), which would deadlock otherwise).
#pragma once

#include <algorithm>
#include <array>

#include "devices/pc/uart_16550.h"
#include "tests/fuzz/fuzz_target.h"

namespace minivmm::fuzz {

class Uart16550Rig final : public Rig {
 public:
  static constexpr std::uint8_t kConfigBatched = 0x01;

  Uart16550Rig(Env& env, std::uint8_t config)
      : env_(env),
        batched_((config & kConfigBatched) != 0),
        uart_(irq4_, sink_, batched_ ? &env.rt_timers() : nullptr, &env.vm_timers()) {
    // The flush timer fires at most once per kFlushDelay.
    env.add_timer_rate(
        1e9 /
        static_cast<double>(std::chrono::nanoseconds(devices::Uart16550::kFlushDelay).count()));
    // The character timeout fires at most once per FIFO change, four of the shortest characters
    // (5N1 at divisor 1: 7 bits at 115200 baud) after it.
    env.add_timer_rate(115'200.0 / (4 * 7));
    uart_.set_on_rx_space([this] {
      FUZZ_CHECK(env_.phase() == Phase::kGuestAccess, "UART rx-space hook during %s",
                 phase_name(env_.phase()));
      ++hook_calls_;
      FUZZ_CHECK(uart_.rx_space() > 0, "UART rx-space hook with no space");
    });
  }

  std::span<const Slot> slots() const noexcept override { return slots_; }

  void before_access(std::size_t /*slot*/, std::uint16_t /*offset*/) override {
    level_before_ = irq4_.level();
  }

  void after_read(std::size_t /*slot*/, std::uint16_t offset,
                  std::span<const std::uint8_t> data) override {
    // IIR is checked only when no register with a read side effect (RBR, LSR, MSR) precedes it
    // in the same access: then it reports the state the line was left in by the last call.
    if (offset == kIir) check_iir(data[0]);
    if (offset == kIer && data.size() > 1) check_iir(data[1]);
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (offset + i == kLsr) {
        FUZZ_CHECK((data[i] & 0x60) == 0x60, "UART LSR 0x%02x without THRE|TEMT", data[i]);
        FUZZ_CHECK((data[i] & 0x9c) == 0, "UART LSR 0x%02x reports a line error", data[i]);
      }
      if (offset + i >= devices::Uart16550::kPortCount) {
        FUZZ_CHECK(data[i] == 0xff, "UART byte past offset 7 read 0x%02x", data[i]);
      }
    }
  }

  void after_write(std::size_t /*slot*/, std::uint16_t offset,
                   std::span<const std::uint8_t> data) override {
    for (std::size_t i = 0; i < data.size(); ++i) {
      switch (offset + i) {
        case kThr:
          ++thr_writes_;  // with DLAB set it is DLL: counting it keeps this an upper bound
          break;
        case kFcr:
          fifo_ = (data[i] & 0x01) != 0;
          break;
        case kMcr:
          mcr_ = data[i] & 0x1f;
          break;
        default:
          break;
      }
    }
  }

  void host_op(const Op& op) override {
    const auto bytes = op.value_bytes();
    const std::size_t n = op.arg % 5u;
    std::size_t space = 0;
    std::size_t took = 0;
    {
      Env::PhaseScope scope(env_, Phase::kHostCall);
      space = uart_.rx_space();
      took = uart_.receive(std::span(bytes).first(n));
    }
    offered_ += n;
    FUZZ_CHECK(took == std::min(n, space), "UART receive took %zu of %zu with %zu free", took, n,
               space);
  }

  void check() override {
    const devices::UartStats s = uart_.stats();
    FUZZ_CHECK(sink_.total() <= s.bytes_out && s.bytes_out <= thr_writes_,
               "UART output %llu, bytes_out %llu, THR writes %llu",
               static_cast<unsigned long long>(sink_.total()),
               static_cast<unsigned long long>(s.bytes_out),
               static_cast<unsigned long long>(thr_writes_));
    FUZZ_CHECK(s.bytes_out - sink_.total() <= (batched_ ? devices::Uart16550::kTxBatch : 0),
               "UART holds %llu unflushed bytes",
               static_cast<unsigned long long>(s.bytes_out - sink_.total()));
    FUZZ_CHECK(s.sink_writes == sink_.writes(), "UART sink_writes %llu, sink saw %llu",
               static_cast<unsigned long long>(s.sink_writes),
               static_cast<unsigned long long>(sink_.writes()));
    FUZZ_CHECK(s.bytes_in <= offered_, "UART accepted %llu of %llu offered bytes",
               static_cast<unsigned long long>(s.bytes_in),
               static_cast<unsigned long long>(offered_));
  }

  void finish() override {
    {
      Env::PhaseScope scope(env_, Phase::kHostCall);
      uart_.flush();
    }
    check();
    FUZZ_CHECK(sink_.total() == uart_.stats().bytes_out, "UART flush() left bytes behind");
  }

  std::uint64_t digest() const override {
    const devices::UartStats s = uart_.stats();
    return irq4_.rises() * 31 + sink_.total() * 17 + s.bytes_in * 7 + s.rx_overruns * 3 +
           hook_calls_;
  }

 private:
  static constexpr std::uint16_t kThr = 0;
  static constexpr std::uint16_t kIer = 1;
  static constexpr std::uint16_t kIir = 2;
  static constexpr std::uint16_t kFcr = 2;
  static constexpr std::uint16_t kMcr = 4;
  static constexpr std::uint16_t kLsr = 5;

  void check_iir(std::uint8_t iir) const noexcept {
    const std::uint8_t id = iir & 0x0f;
    FUZZ_CHECK(
        id == 0x01 || id == 0x00 || id == 0x02 || id == 0x04 || id == 0x06 || (id == 0x0c && fifo_),
        "UART IIR 0x%02x: bad interrupt ID (FIFO %s)", iir, fifo_ ? "on" : "off");
    FUZZ_CHECK((iir & 0xf0) == (fifo_ ? 0xc0 : 0x00), "UART IIR 0x%02x with FIFO %s", iir,
               fifo_ ? "on" : "off");
    const bool gate = (mcr_ & 0x08) != 0 && (mcr_ & 0x10) == 0;  // OUT2 and not LOOP
    const bool expected = gate && (iir & 0x01) == 0;
    FUZZ_CHECK(level_before_ == expected, "UART IRQ4 was %d but IIR 0x%02x with MCR 0x%02x says %d",
               level_before_ ? 1 : 0, iir, mcr_, expected ? 1 : 0);
  }

  Env& env_;
  const bool batched_;
  // IRQ4 follows register state and the character timeout; the flush timer must never touch it
  // (it runs in the same timer phase, so that is checked by the IIR checks instead).
  CheckedIrqLine irq4_{env_, "UART IRQ4", CheckedIrqLine::Kind::kLevel,
                       (Phase::kGuestAccess | Phase::kHostCall) | bits(Phase::kTimers)};
  CountingSink sink_{env_, devices::Uart16550::kTxBatch};
  devices::Uart16550 uart_;

  bool level_before_ = false;
  bool fifo_ = false;
  std::uint8_t mcr_ = 0;
  std::uint64_t thr_writes_ = 0;
  std::uint64_t offered_ = 0;
  std::uint64_t hook_calls_ = 0;
  const std::array<Slot, 1> slots_ = {
      Slot{&uart_, devices::Uart16550::kPortCount, 0x3f8}};  // COM1, where the board puts it
};

}  // namespace minivmm::fuzz
