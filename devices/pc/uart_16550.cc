#include "devices/pc/uart_16550.h"

#include <algorithm>

namespace minivmm::devices {
namespace {

// Register offsets (PC16550D Table II). DLAB (LCR bit 7) maps 0 and 1 to the divisor latch.
constexpr std::uint16_t kRbrThr = 0;  // DLL with DLAB
constexpr std::uint16_t kIer = 1;     // DLM with DLAB
constexpr std::uint16_t kIirFcr = 2;
constexpr std::uint16_t kLcr = 3;
constexpr std::uint16_t kMcr = 4;
constexpr std::uint16_t kLsr = 5;
constexpr std::uint16_t kMsr = 6;
constexpr std::uint16_t kScr = 7;

// IER.
constexpr std::uint8_t kIerRdi = 0x01;   // received data available (and character timeout)
constexpr std::uint8_t kIerThri = 0x02;  // THR empty
constexpr std::uint8_t kIerRlsi = 0x04;  // receiver line status
constexpr std::uint8_t kIerMsi = 0x08;   // modem status
constexpr std::uint8_t kIerMask = 0x0f;  // bits 4-7 are always 0

// IIR: bit 0 set means "no interrupt pending"; bits 1-3 identify the source (Table IV).
constexpr std::uint8_t kIirNoInt = 0x01;
constexpr std::uint8_t kIirMsi = 0x00;
constexpr std::uint8_t kIirThri = 0x02;
constexpr std::uint8_t kIirRdi = 0x04;
constexpr std::uint8_t kIirRlsi = 0x06;
constexpr std::uint8_t kIirCti = 0x0c;  // character timeout
constexpr std::uint8_t kIirFifoEnabled = 0xc0;

// FCR.
constexpr std::uint8_t kFcrEnable = 0x01;
constexpr std::uint8_t kFcrClearRx = 0x02;
[[maybe_unused]] constexpr std::uint8_t kFcrClearTx = 0x04;
constexpr unsigned kFcrTriggerShift = 6;
constexpr std::array<std::uint8_t, 4> kRxTriggerLevels = {1, 4, 8, 14};

// LCR.
constexpr std::uint8_t kLcrWordLength = 0x03;  // 5 + value data bits
constexpr std::uint8_t kLcrStopBits = 0x04;    // 1.5 stop bits with 5 data bits, else 2
constexpr std::uint8_t kLcrParity = 0x08;
constexpr std::uint8_t kLcrDlab = 0x80;

// The PC's UART clock, 1.8432 MHz, divided by 16: bits per second at divisor 1.
constexpr std::int64_t kBaudAtDivisorOne = 115'200;
constexpr std::int64_t kTimeoutCharacters = 4;

// MCR. Only bits 0-4 exist.
constexpr std::uint8_t kMcrDtr = 0x01;
constexpr std::uint8_t kMcrRts = 0x02;
constexpr std::uint8_t kMcrOut1 = 0x04;
constexpr std::uint8_t kMcrOut2 = 0x08;
constexpr std::uint8_t kMcrLoop = 0x10;
constexpr std::uint8_t kMcrMask = 0x1f;

// LSR.
constexpr std::uint8_t kLsrDr = 0x01;
constexpr std::uint8_t kLsrOe = 0x02;
constexpr std::uint8_t kLsrThrEmpty = 0x20;
constexpr std::uint8_t kLsrTemt = 0x40;

// MSR: bits 0-3 are deltas, 4-7 the modem inputs.
constexpr std::uint8_t kMsrDcts = 0x01;
constexpr std::uint8_t kMsrDdsr = 0x02;
constexpr std::uint8_t kMsrTeri = 0x04;  // trailing edge of RI (1 -> 0)
constexpr std::uint8_t kMsrDdcd = 0x08;
constexpr std::uint8_t kMsrCts = 0x10;
constexpr std::uint8_t kMsrDsr = 0x20;
constexpr std::uint8_t kMsrRi = 0x40;
constexpr std::uint8_t kMsrDcd = 0x80;
// Outside loopback: a terminal that is always connected and ready.
constexpr std::uint8_t kMsrConnected = kMsrDcd | kMsrDsr | kMsrCts;

}  // namespace

Uart16550::Uart16550(IrqLine& irq, ByteSink& out, timers::TimerList* rt_timers,
                     timers::TimerList* vm_timers)
    : irq_(irq), out_(out), vm_timers_(vm_timers) {
  if (vm_timers != nullptr) {
    rx_timeout_timer_.emplace(*vm_timers, "uart-rx-timeout",
                              [this](const timers::Timer::Expiry&) { on_rx_timeout(); });
  }
  if (rt_timers != nullptr) {
    flush_timer_.emplace(*rt_timers, "uart-flush",
                         [this](const timers::Timer::Expiry&) { on_flush_timer(); });
    // A partial line may wait for the loop's next wakeup (the next guest tick, typically)
    // rather than cost a wakeup of its own.
    flush_timer_->set_slack(kFlushSlack);
  }
}

Uart16550::~Uart16550() {
  // Cancel first: the callbacks take mu_ and must not run once we start tearing down.
  rx_timeout_timer_.reset();
  flush_timer_.reset();
  flush();
}

void Uart16550::set_on_rx_space(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  on_rx_space_ = std::move(fn);
}

UartStats Uart16550::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Uart16550::report(ReportWriter& out) const {
  const UartStats s = stats();
  out.count("bytes_out", s.bytes_out);
  out.count("sink_writes", s.sink_writes);
  out.count("bytes_in", s.bytes_in);
  out.count("rx_overruns", s.rx_overruns);
  out.count("rx_timeouts", s.rx_timeouts);
  out.count("bad_accesses", s.bad_accesses);
}

// An ISA device sees a wide access as consecutive byte cycles (the bus splits it), so a 16- or
// 32-bit access touches the next registers too, with their side effects; past offset 7 nothing
// answers and the bytes read as ones.
void Uart16550::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    if (data.size() != 1 || offset >= kPortCount) ++stats_.bad_accesses;
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::size_t reg = std::size_t{offset} + i;
      data[i] = reg < kPortCount ? read_reg(static_cast<std::uint16_t>(reg)) : 0xff;
    }
    restart_rx_timeout();
    update_irq();
    hook = take_rx_space_hook();
  }
  if (hook) hook();
}

void Uart16550::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  std::function<void()> hook;
  {
    std::lock_guard lock(mu_);
    if (data.size() != 1 || offset >= kPortCount) ++stats_.bad_accesses;
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::size_t reg = std::size_t{offset} + i;
      if (reg < kPortCount) write_reg(static_cast<std::uint16_t>(reg), data[i]);
    }
    restart_rx_timeout();
    update_irq();
    hook = take_rx_space_hook();
  }
  if (hook) hook();
}

std::uint8_t Uart16550::read_reg(std::uint16_t offset) noexcept {
  switch (offset) {
    case kRbrThr:
      if (lcr_ & kLcrDlab) return dll_;
      return rx_pop();
    case kIer:
      if (lcr_ & kLcrDlab) return dlm_;
      return ier_;
    case kIirFcr: {
      const std::uint8_t id = pending_iir_id();
      // Reading IIR acknowledges a THRE interrupt, but only when IIR reports it: a higher
      // priority source hides it, and then it stays pending (PC16550D Table IV, "Reading the
      // IIR register (if source of interrupt)").
      if (id == kIirThri) thr_ipending_ = false;
      return static_cast<std::uint8_t>(id | (fifo_enabled_ ? kIirFifoEnabled : 0));
    }
    case kLcr:
      return lcr_;
    case kMcr:
      return mcr_;
    case kLsr: {
      std::uint8_t lsr = kLsrThrEmpty | kLsrTemt;
      if (rx_count_ > 0) lsr |= kLsrDr;
      if (overrun_) lsr |= kLsrOe;
      overrun_ = false;  // the error bits clear on read
      return lsr;
    }
    case kMsr: {
      const auto msr = static_cast<std::uint8_t>(modem_inputs() | msr_delta_);
      msr_delta_ = 0;
      return msr;
    }
    case kScr:
      return scr_;
    default:
      return 0xff;
  }
}

void Uart16550::write_reg(std::uint16_t offset, std::uint8_t value) noexcept {
  switch (offset) {
    case kRbrThr:
      if (lcr_ & kLcrDlab) {
        dll_ = value;
        return;
      }
      // Writing THR acknowledges THRE; the byte leaves at once, so THR is empty again and the
      // interrupt is pending anew (QEMU serial.c does the same after its synchronous send).
      thr_ipending_ = false;
      transmit(value);
      thr_ipending_ = true;
      return;
    case kIer: {
      if (lcr_ & kLcrDlab) {
        dlm_ = value;
        return;
      }
      const auto ier = static_cast<std::uint8_t>(value & kIerMask);
      // Enabling THRI while THR is empty raises the THRE interrupt at once: drivers rely on it
      // to start transmitting (Linux serial8250 start_tx, and its UART_BUG_TXEN probe).
      if ((ier & kIerThri) && !(ier_ & kIerThri)) thr_ipending_ = true;
      ier_ = ier;
      return;
    }
    case kIirFcr: {
      const bool enable = (value & kFcrEnable) != 0;
      // Switching between FIFO and 16450 mode empties both FIFOs (FCR bit 0 description).
      if (enable != fifo_enabled_) rx_clear();
      fifo_enabled_ = enable;
      // "FCR0 must be 1 when other FCR bits are written to or they will not be programmed."
      if (!enable) {
        rx_trigger_ = 1;
        return;
      }
      if (value & kFcrClearRx) rx_clear();
      // kFcrClearTx needs nothing: the TX FIFO is always empty (transmission is instantaneous).
      rx_trigger_ = kRxTriggerLevels[static_cast<std::size_t>(value >> kFcrTriggerShift)];
      return;
    }
    case kLcr:
      lcr_ = value;
      return;
    case kMcr:
      set_mcr(static_cast<std::uint8_t>(value & kMcrMask));
      return;
    case kLsr:
    case kMsr:
      // Read-only status registers (LSR writes are for factory test only): ignored.
      return;
    case kScr:
      scr_ = value;
      return;
    default:
      return;
  }
}

std::uint8_t Uart16550::modem_inputs() const noexcept {
  if (!(mcr_ & kMcrLoop)) return kMsrConnected;
  // Loopback wires the outputs to the inputs: RTS->CTS, DTR->DSR, OUT1->RI, OUT2->DCD.
  std::uint8_t in = 0;
  if (mcr_ & kMcrRts) in |= kMsrCts;
  if (mcr_ & kMcrDtr) in |= kMsrDsr;
  if (mcr_ & kMcrOut1) in |= kMsrRi;
  if (mcr_ & kMcrOut2) in |= kMsrDcd;
  return in;
}

void Uart16550::set_mcr(std::uint8_t value) noexcept {
  const std::uint8_t before = modem_inputs();
  mcr_ = value;
  const std::uint8_t after = modem_inputs();
  const auto changed = static_cast<std::uint8_t>(before ^ after);
  if (changed & kMsrCts) msr_delta_ |= kMsrDcts;
  if (changed & kMsrDsr) msr_delta_ |= kMsrDdsr;
  if (changed & kMsrDcd) msr_delta_ |= kMsrDdcd;
  if ((before & kMsrRi) && !(after & kMsrRi)) msr_delta_ |= kMsrTeri;
}

std::uint8_t Uart16550::pending_iir_id() const noexcept {
  if ((ier_ & kIerRlsi) && overrun_) return kIirRlsi;
  if ((ier_ & kIerRdi) && rx_count_ > 0) {
    if (!fifo_enabled_ || rx_count_ >= rx_trigger_) return kIirRdi;
    // Below the trigger level the receiver stays silent until the character timeout.
    if (rx_timeout_) return kIirCti;
  }
  if ((ier_ & kIerThri) && thr_ipending_) return kIirThri;
  if ((ier_ & kIerMsi) && msr_delta_ != 0) return kIirMsi;
  return kIirNoInt;
}

void Uart16550::update_irq() noexcept {
  // On a PC the UART's INTRPT pin reaches the PIC through a buffer enabled by the OUT2 output
  // (active when MCR bit 3 is 1), so a driver must set OUT2 to get interrupts; Linux's 8250
  // driver does for every port with an IRQ. Loopback forces the OUT2 pin inactive (MCR bit 4
  // description), so a UART in loopback raises no IRQ even though IIR shows the interrupt.
  const bool gate = (mcr_ & kMcrOut2) && !(mcr_ & kMcrLoop);
  const bool level = gate && pending_iir_id() != kIirNoInt;
  if (level == irq_level_) return;
  irq_level_ = level;
  irq_.set_level(level);
}

void Uart16550::transmit(std::uint8_t byte) noexcept {
  if (mcr_ & kMcrLoop) {
    rx_push(byte);
    return;
  }
  ++stats_.bytes_out;
  if (!flush_timer_) {
    out_.write(std::span<const std::uint8_t>(&byte, 1));
    ++stats_.sink_writes;
    return;
  }
  tx_[tx_len_++] = byte;
  if (byte == '\n' || tx_len_ == tx_.size()) {
    flush_locked();
  } else if (tx_len_ == 1) {
    flush_timer_->arm_after(kFlushDelay);
  }
}

void Uart16550::flush_locked() noexcept {
  if (tx_len_ == 0) return;
  out_.write(std::span<const std::uint8_t>(tx_.data(), tx_len_));
  ++stats_.sink_writes;
  tx_len_ = 0;
  if (flush_timer_) flush_timer_->cancel();
}

void Uart16550::flush() noexcept {
  std::lock_guard lock(mu_);
  flush_locked();
}

void Uart16550::on_flush_timer() {
  std::lock_guard lock(mu_);
  flush_locked();
}

std::size_t Uart16550::rx_space_locked() const noexcept {
  if (mcr_ & kMcrLoop) return 0;
  const std::size_t capacity = fifo_enabled_ ? kFifoSize : 1;
  return rx_count_ < capacity ? capacity - rx_count_ : 0;
}

std::size_t Uart16550::rx_space() const noexcept {
  std::lock_guard lock(mu_);
  const std::size_t space = rx_space_locked();
  if (space == 0) rx_waiting_ = true;
  return space;
}

std::size_t Uart16550::receive(std::span<const std::uint8_t> bytes) noexcept {
  std::lock_guard lock(mu_);
  const std::size_t n = std::min(bytes.size(), rx_space_locked());
  for (std::size_t i = 0; i < n; ++i) rx_push(bytes[i]);
  stats_.bytes_in += n;
  if (n < bytes.size() || rx_space_locked() == 0) rx_waiting_ = true;
  restart_rx_timeout();
  update_irq();
  return n;
}

void Uart16550::rx_push(std::uint8_t byte) noexcept {
  const std::size_t capacity = fifo_enabled_ ? kFifoSize : 1;
  if (rx_count_ == capacity) {
    // Overrun. With the FIFO the byte in the shift register is lost and the FIFO kept; without
    // it the holding register is overwritten (PC16550D LSR bit 1).
    overrun_ = true;
    ++stats_.rx_overruns;
    if (!fifo_enabled_) rx_[rx_head_] = byte;
    return;
  }
  rx_[(rx_head_ + rx_count_) % kFifoSize] = byte;
  ++rx_count_;
  rx_activity_ = true;
}

std::uint8_t Uart16550::rx_pop() noexcept {
  if (rx_count_ == 0) return rbr_;
  rbr_ = rx_[rx_head_];
  rx_head_ = (rx_head_ + 1) % kFifoSize;
  --rx_count_;
  rx_activity_ = true;
  return rbr_;
}

void Uart16550::rx_clear() noexcept {
  rx_head_ = 0;
  rx_count_ = 0;
  rx_activity_ = true;
}

void Uart16550::restart_rx_timeout() noexcept {
  if (!rx_activity_) return;
  rx_activity_ = false;
  rx_timeout_ = false;
  if (!rx_timeout_timer_) return;
  if (fifo_enabled_ && rx_count_ > 0) {
    rx_timeout_timer_->arm_after(rx_timeout_delay_locked());
  } else {
    rx_timeout_timer_->cancel();
  }
}

void Uart16550::on_rx_timeout() {
  std::lock_guard lock(mu_);
  // A read or a clear that raced with the expiry has already restarted or cancelled the count.
  if (rx_activity_ || !fifo_enabled_ || rx_count_ == 0 || rx_timeout_) return;
  rx_timeout_ = true;
  ++stats_.rx_timeouts;
  update_irq();
}

timers::Nanos Uart16550::rx_timeout_delay() const {
  std::lock_guard lock(mu_);
  return rx_timeout_delay_locked();
}

timers::Nanos Uart16550::rx_timeout_delay_locked() const noexcept {
  // Counted in half bits, for the 1.5 stop bits of 5-bit words.
  const std::int64_t data_bits = 5 + (lcr_ & kLcrWordLength);
  std::int64_t half_bits = 2 * (1 + data_bits);  // start + data
  if (lcr_ & kLcrParity) half_bits += 2;
  if (!(lcr_ & kLcrStopBits)) {
    half_bits += 2;
  } else {
    half_bits += data_bits == 5 ? 3 : 4;
  }
  // The baud generator is a 16-bit down-counter: a divisor of 0 counts 65536.
  std::int64_t divisor = (std::int64_t{dlm_} << 8) | dll_;
  if (divisor == 0) divisor = 0x10000;
  // ns = characters * half_bits/2 * divisor / 115200 s; at most ~4 * 12 * 65536 / 115200 s.
  return timers::Nanos{kTimeoutCharacters * half_bits * divisor * 1'000'000'000 /
                       (2 * kBaudAtDivisorOne)};
}

std::function<void()> Uart16550::take_rx_space_hook() noexcept {
  if (!rx_waiting_ || rx_space_locked() == 0) return nullptr;
  rx_waiting_ = false;
  return on_rx_space_;
}

}  // namespace minivmm::devices
