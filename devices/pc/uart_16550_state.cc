// Uart16550's snapshot record: what the guest can see (registers, the RX FIFO in order, the
// pending interrupts) and the character timeout's deadline, so that a timeout counting when the
// snapshot was taken fires at the same vm_clock instant after a restore.
#include <algorithm>

#include "devices/pc/uart_16550.h"

namespace minivmm::devices {
namespace {

constexpr std::uint8_t kUartStateVersion = 1;
constexpr std::uint8_t kIerBits = 0x0f;  // bits 4-7 of IER always read 0
constexpr std::uint8_t kMcrBits = 0x1f;
constexpr std::uint8_t kMsrDeltaBits = 0x0f;

}  // namespace

void Uart16550::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, kUartStateVersion);
  out.u8(dll_);
  out.u8(dlm_);
  out.u8(ier_);
  out.u8(lcr_);
  out.u8(mcr_);
  out.u8(scr_);
  out.boolean(overrun_);
  out.boolean(fifo_enabled_);
  out.u8(rx_trigger_);
  out.boolean(thr_ipending_);
  out.u8(msr_delta_);
  out.u8(rbr_);
  std::array<std::uint8_t, kFifoSize> fifo{};
  for (std::size_t i = 0; i < rx_count_; ++i) fifo[i] = rx_[(rx_head_ + i) % kFifoSize];
  out.bytes(std::span(fifo.data(), rx_count_));
  out.boolean(rx_timeout_);
  const bool counting = rx_timeout_timer_ && rx_timeout_timer_->pending();
  out.boolean(counting);
  out.i64(counting ? rx_timeout_timer_->deadline().count() : 0);
  out.u64(stats_.bytes_out);
  out.u64(stats_.sink_writes);
  out.u64(stats_.bytes_in);
  out.u64(stats_.rx_overruns);
  out.u64(stats_.bad_accesses);
  out.u64(stats_.rx_timeouts);
}

void Uart16550::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  read_version(in, kUartStateVersion);
  const std::uint8_t dll = in.u8();
  const std::uint8_t dlm = in.u8();
  const std::uint8_t ier = in.u8();
  const std::uint8_t lcr = in.u8();
  const std::uint8_t mcr = in.u8();
  const std::uint8_t scr = in.u8();
  const bool overrun = in.boolean();
  const bool fifo_enabled = in.boolean();
  const std::uint8_t trigger = in.u8();
  const bool thr_ipending = in.boolean();
  const std::uint8_t msr_delta = in.u8();
  const std::uint8_t rbr = in.u8();
  const std::vector<std::uint8_t> fifo = in.bytes(kFifoSize);
  const bool rx_timeout = in.boolean();
  const bool counting = in.boolean();
  const timers::Nanos deadline{in.i64()};
  UartStats stats;
  stats.bytes_out = in.u64();
  stats.sink_writes = in.u64();
  stats.bytes_in = in.u64();
  stats.rx_overruns = in.u64();
  stats.bad_accesses = in.u64();
  stats.rx_timeouts = in.u64();
  in.expect_end();

  // The checks a register write would make, and the invariants the FCR logic keeps.
  if ((ier & ~kIerBits) != 0) in.fail("IER 0x" + std::to_string(ier) + " has reserved bits");
  if ((mcr & ~kMcrBits) != 0) in.fail("MCR has reserved bits");
  if ((msr_delta & ~kMsrDeltaBits) != 0) in.fail("MSR deltas outside bits 0-3");
  const bool trigger_ok = fifo_enabled ? (trigger == 1 || trigger == 4 || trigger == 8 ||
                                          trigger == 14)
                                       : trigger == 1;
  if (!trigger_ok) in.fail("RX trigger level " + std::to_string(trigger));
  const std::size_t capacity = fifo_enabled ? kFifoSize : 1;
  if (fifo.size() > capacity) {
    in.fail(std::to_string(fifo.size()) + " bytes in an RX buffer of " + std::to_string(capacity));
  }
  const bool may_time_out = fifo_enabled && !fifo.empty();
  if (rx_timeout && !may_time_out) in.fail("a character timeout with nothing to time out");
  if (counting) {
    if (!may_time_out || rx_timeout) in.fail("a character timeout counting for nothing");
    if (deadline < timers::Nanos{0}) in.fail("a negative timeout deadline");
  } else if (deadline != timers::Nanos{0}) {
    in.fail("a deadline without a timeout counting");
  }

  dll_ = dll;
  dlm_ = dlm;
  ier_ = ier;
  lcr_ = lcr;
  mcr_ = mcr;
  scr_ = scr;
  overrun_ = overrun;
  fifo_enabled_ = fifo_enabled;
  rx_trigger_ = trigger;
  thr_ipending_ = thr_ipending;
  msr_delta_ = msr_delta;
  rbr_ = rbr;
  std::copy(fifo.begin(), fifo.end(), rx_.begin());
  rx_head_ = 0;
  rx_count_ = fifo.size();
  rx_activity_ = false;
  rx_timeout_ = rx_timeout;
  stats_ = stats;
  if (counting && rx_timeout_timer_) {
    // The count runs at most one timeout (at the saved divisor and framing) past now; a
    // deadline further out was never armed by this device.
    if (deadline > vm_timers_->clock().now() + rx_timeout_delay_locked()) {
      in.fail("a timeout deadline beyond one timeout from now");
    }
    rx_timeout_timer_->arm_at(deadline);
  }
  update_irq();  // a fresh device's line is low: raise it if the record has an interrupt
}

}  // namespace minivmm::devices
