// Emulates the National Semiconductor PC16550D UART, as on a PC's COM1 (0x3f8-0x3ff, IRQ4): the
// device sees offsets 0-7. Data sheet: "PC16550D Universal Asynchronous Receiver/Transmitter with
// FIFOs" (National Semiconductor / TI SNLS378).
//
// Modelled: every register, DLAB and the divisor latch, IER, IIR with the data-sheet priorities
// (line status > received data / character timeout > THR empty > modem status) and the FIFO bits
// 0xC0, FCR (FIFO enable, RX/TX clear, trigger level 1/4/8/14), LCR, MCR with loopback and the
// PC's OUT2 interrupt gate, LSR (DR, OE, THRE, TEMT), MSR with delta bits, SCR; a 16-byte RX
// FIFO (one holding register with the FIFO off).
//
// Deliberately missing, because nothing on the host side needs it:
//  - Transmit timing. Transmission is instantaneous (THR and TEMT are always empty again right
//    after a write, so the TX FIFO never holds anything); the divisor and LCR framing pace only
//    the receiver's character timeout (below).
//  - Errors that need a line: BI, PE, FE and the FIFO error bit 7 of LSR are never set.
//  - Modem inputs are those of a terminal that is always there (DCD, DSR, CTS asserted, RI off);
//    RTS/DTR are not forwarded anywhere. DMA mode (FCR bit 3) is ignored.
//
// Character timeout (PC16550D "FIFO Interrupt Mode Operation"): with the FIFO on and data below
// the trigger level, IIR reports nothing from the receiver until no character has entered or
// left the RX FIFO for four character times; then it reports 0x0C (and raises the IRQ) until the
// guest reads a character, which restarts the count. A character time follows the divisor and
// the LCR framing (start + 5..8 data + parity + 1, 1.5 or 2 stop bits at 1.8432 MHz / 16 per
// divisor unit), counted on vm_clock so that a paused VM does not time out. Drivers depend on
// the wait: one that reads IIR right after a burst arrives must see 0xC1, not a timeout.
//
// Output is batched (a VM exit per byte is unavoidable, a write syscall per byte is not): bytes
// collect in a buffer that is flushed on '\n', when it holds kTxBatch bytes, from an rt_clock
// timer kFlushDelay after the first unflushed byte, and by flush(). Without rt_timers every byte
// is written at once.
//
// Threads: read()/write() on vCPU threads; receive()/rx_space()/flush()/stats() on any thread;
// the flush and character-timeout timers' callbacks on the loop thread. mu_ guards all state. Lock order: mu_ ->
// TimerList mutex; the IrqLine and the ByteSink are called with mu_ held (neither calls back),
// the on_rx_space hook without it.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>

#include "devices/bus/byte_sink.h"
#include "devices/bus/irq_line.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/device_state.h"
#include "devices/bus/report_writer.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::devices {

struct UartStats {
  std::uint64_t bytes_out = 0;     // THR bytes sent to the sink (not those looped back)
  std::uint64_t sink_writes = 0;   // ByteSink::write calls (flushes)
  std::uint64_t bytes_in = 0;      // bytes accepted by receive()
  std::uint64_t rx_overruns = 0;   // bytes lost to a full RX FIFO (sets LSR.OE)
  std::uint64_t bad_accesses = 0;  // accesses wider than a byte, or past offset 7
  std::uint64_t rx_timeouts = 0;   // character timeouts indicated (IIR 0x0C)
};

class Uart16550 final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  // COM1 on a PC; the VMM attaches the device there.
  static constexpr timers::Nanos kFlushSlack{20'000'000};
  static constexpr std::uint16_t kPortCount = 8;
  static constexpr unsigned kCom1Irq = 4;

  static constexpr std::size_t kFifoSize = 16;
  static constexpr std::size_t kTxBatch = 256;
  // Long enough to gather a burst written without newlines (a prompt, a progress bar), short
  // enough that a human does not see the delay.
  static constexpr std::chrono::milliseconds kFlushDelay{2};

  // `irq` and `out` must outlive the device. `rt_timers` (the rt_clock list) enables batching.
  // `vm_timers` (the vm_clock list) times the receiver's character timeout; without it the
  // timeout never comes (a polling driver still sees LSR.DR, an interrupt-driven one gets data
  // below the trigger level only when more arrives), so a VMM always passes it.
  Uart16550(IrqLine& irq, ByteSink& out, timers::TimerList* rt_timers = nullptr,
            timers::TimerList* vm_timers = nullptr);
  ~Uart16550() override;
  Uart16550(const Uart16550&) = delete;
  Uart16550& operator=(const Uart16550&) = delete;

  std::string_view name() const noexcept override { return report_key(); }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  // Host input. Any thread. Pushes up to rx_space() bytes into the RX FIFO and returns how many
  // it took: the rest waits on the host side (back-pressure instead of overruns). Takes nothing
  // while the UART is in loopback, whose receiver is disconnected from the line.
  std::size_t receive(std::span<const std::uint8_t> bytes) noexcept;
  // Four character times at the current divisor and framing: how long the RX FIFO must sit
  // untouched before a character timeout.
  timers::Nanos rx_timeout_delay() const;

  // Bytes receive() would take now. A caller that gets 0 also gets the on_rx_space hook once
  // the guest makes room.
  std::size_t rx_space() const noexcept;
  // Called, on a vCPU thread and without the UART lock, when the guest frees RX space after a
  // receive() took less than it was offered (or filled the FIFO). Typically schedules a bottom
  // half that resumes reading the host input. Set it before input starts; may be reset to null.
  void set_on_rx_space(std::function<void()> fn);

  // Writes any batched output now. Any thread; the VMM calls it at exit.
  void flush() noexcept;

  UartStats stats() const;

  // ReportingDevice: the counters of stats() under "uart".
  std::string_view report_key() const noexcept override { return "uart"; }
  void report(ReportWriter& out) const override;

  // StatefulDevice (uart_16550_state.cc): the registers, the RX FIFO, the character timeout
  // (its deadline on vm_clock) and the counters. Batched output not yet flushed is not part of
  // it: it belongs to the run that wrote it, which flushes it at exit.
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  std::uint8_t read_reg(std::uint16_t offset) noexcept;
  void write_reg(std::uint16_t offset, std::uint8_t value) noexcept;

  // The interrupt the IIR reports now (its low four bits; kIirNoInt when none).
  std::uint8_t pending_iir_id() const noexcept;
  // The one place that drives the IRQ line (kvmtool serial8250_update_irq): recomputes the
  // level and calls set_level only when it changes.
  void update_irq() noexcept;

  void transmit(std::uint8_t byte) noexcept;
  void flush_locked() noexcept;
  void on_flush_timer();
  void rx_push(std::uint8_t byte) noexcept;
  std::uint8_t rx_pop() noexcept;
  void rx_clear() noexcept;
  // After the RX FIFO changed (rx_activity_): the timeout indication goes and its count
  // restarts while the FIFO holds data. Called once per register access or host read, not per
  // byte, so a 16-byte burst arms the timer once.
  void restart_rx_timeout() noexcept;
  void on_rx_timeout();
  timers::Nanos rx_timeout_delay_locked() const noexcept;
  std::size_t rx_space_locked() const noexcept;
  std::uint8_t modem_inputs() const noexcept;
  void set_mcr(std::uint8_t value) noexcept;
  // The hook to call once mu_ is released, if the guest just freed space someone waits for.
  std::function<void()> take_rx_space_hook() noexcept;

  IrqLine& irq_;
  ByteSink& out_;
  timers::TimerList* const vm_timers_;  // may be null (no character timeout)

  mutable std::mutex mu_;  // lock order: mu_ -> TimerList mutex

  // Registers (guarded by mu_).
  std::uint8_t dll_ = 0x0c;  // 9600 baud from 1.8432 MHz; firmware reprograms it anyway
  std::uint8_t dlm_ = 0;
  std::uint8_t ier_ = 0;
  std::uint8_t lcr_ = 0;
  std::uint8_t mcr_ = 0;
  std::uint8_t scr_ = 0;
  bool overrun_ = false;  // LSR.OE, cleared by reading LSR
  bool fifo_enabled_ = false;
  std::uint8_t rx_trigger_ = 1;
  bool thr_ipending_ = false;   // the THRE interrupt: set when THR empties, cleared by IIR/THR
  std::uint8_t msr_delta_ = 0;  // MSR bits 0-3, cleared by reading MSR
  std::uint8_t rbr_ = 0;        // last byte read: RBR keeps it when the FIFO runs empty

  std::array<std::uint8_t, kFifoSize> rx_{};
  std::size_t rx_head_ = 0;
  std::size_t rx_count_ = 0;
  mutable bool rx_waiting_ = false;  // someone wants on_rx_space when space appears
  std::function<void()> on_rx_space_;

  bool irq_level_ = false;

  std::array<std::uint8_t, kTxBatch> tx_{};
  std::size_t tx_len_ = 0;
  std::optional<timers::Timer> flush_timer_;  // only with rt_timers

  bool rx_activity_ = false;  // the RX FIFO gained or lost bytes since the last restart
  bool rx_timeout_ = false;   // the character timeout is indicated (IIR 0x0C)
  std::optional<timers::Timer> rx_timeout_timer_;  // only with vm_timers

  UartStats stats_;
};

}  // namespace minivmm::devices
