// Mc146818Rtc's register file: construction and the PC's CMOS memory map, the index and data
// ports, registers A-D and the time registers in BCD or binary, 12 or 24 hour, and SET's
// freezing and releasing of the clock. The flags and the interrupt timer are in
// mc146818_rtc_interrupts.cc, the grid and calendar arithmetic in mc146818_rtc_time.h.
#include "devices/pc/mc146818_rtc.h"

#include <algorithm>
#include <chrono>

#include "devices/pc/mc146818_rtc_regs.h"
#include "devices/pc/mc146818_rtc_time.h"

namespace minivmm::devices {

// The chip's register map and time arithmetic, private to this device.
using namespace mc146818;

namespace {

using timers::Nanos;

// Index port.
constexpr std::uint8_t kIndexMask = 0x7f;
constexpr std::uint8_t kNmiDisable = 0x80;

// Power-on values: 32.768 kHz divider, 1024 Hz rate (what PC firmware programs); 24 h, BCD.
constexpr std::uint8_t kResetRegA = 0x26;
constexpr std::uint8_t kResetRegB = kRegB24h;

// PC CMOS map (IBM AT Technical Reference; the same offsets QEMU pc.c and SeaBIOS use).
constexpr std::uint8_t kCmosEquipment = 0x14;
constexpr std::uint8_t kCmosBaseMemLow = 0x15;    // KiB below 640K, 2 bytes
constexpr std::uint8_t kCmosExtMemLow = 0x17;     // KiB above 1 MiB, 2 bytes
constexpr std::uint8_t kCmosChecksumHigh = 0x2e;  // sum of 0x10-0x2d, big-endian
constexpr std::uint8_t kCmosChecksumFirst = 0x10;
constexpr std::uint8_t kCmosChecksumLast = 0x2d;
constexpr std::uint8_t kCmosExtMemLow2 = 0x30;   // copy of 0x17/0x18 (POST-reported)
constexpr std::uint8_t kCmosMemAbove16M = 0x34;  // 64 KiB units above 16 MiB, 2 bytes
constexpr std::uint8_t kCmosMemAbove4G = 0x5b;   // 64 KiB units above 4 GiB, 3 bytes
constexpr std::uint8_t kEquipmentFpu = 0x02;     // no floppy, FPU present, EGA/VGA display
constexpr std::uint16_t kBaseMemoryKib = 640;

// UIP rises 244 us (8 cycles of 32.768 kHz) before the update (data sheet, tBUC).
constexpr std::int64_t kUipLeadNs = 244'140;
// The first update after the divider leaves reset comes half a second later.
constexpr std::int64_t kHalfSecondNs = kNsPerSecond / 2;
constexpr int kMinYear = 1970;
constexpr int kMaxYear = 2199;

bool is_time_reg(std::uint8_t index) noexcept {
  switch (index) {
    case kRegSeconds:
    case kRegMinutes:
    case kRegHours:
    case kRegDayOfWeek:
    case kRegDayOfMonth:
    case kRegMonth:
    case kRegYear:
    case kRegCentury:
      return true;
    default:
      return false;
  }
}

void put16(std::array<std::uint8_t, 128>& cmos, std::uint8_t at, std::uint64_t value) {
  cmos[at] = static_cast<std::uint8_t>(value & 0xff);
  cmos[at + 1u] = static_cast<std::uint8_t>((value >> 8) & 0xff);
}

}  // namespace

Mc146818Rtc::Mc146818Rtc(timers::TimerList& vm_timers, const timers::Clock& host_clock,
                         IrqLine& irq8, std::uint64_t ram_size_bytes, std::uint64_t low_ram_ceiling)
    : vm_timers_(vm_timers),
      host_clock_(host_clock),
      irq_(irq8),
      reg_a_(kResetRegA),
      reg_b_(kResetRegB),
      timer_(vm_timers, "rtc", [this](const timers::Timer::Expiry& e) { on_timer(e); }) {
  constexpr std::uint64_t kKib = 1024;
  constexpr std::uint64_t kMib = kKib * 1024;
  constexpr std::uint64_t k64Kib = 64 * kKib;
  const std::uint64_t low = std::min(ram_size_bytes, low_ram_ceiling);
  const std::uint64_t high = ram_size_bytes - low;

  cmos_[kCmosEquipment] = kEquipmentFpu;
  put16(cmos_, kCmosBaseMemLow, kBaseMemoryKib);
  const std::uint64_t ext_kib =
      low > kMib ? std::min<std::uint64_t>((low - kMib) / kKib, 0xffff) : 0;
  put16(cmos_, kCmosExtMemLow, ext_kib);
  put16(cmos_, kCmosExtMemLow2, ext_kib);
  const std::uint64_t above_16m =
      low > 16 * kMib ? std::min<std::uint64_t>((low - 16 * kMib) / k64Kib, 0xffff) : 0;
  put16(cmos_, kCmosMemAbove16M, above_16m);
  const std::uint64_t above_4g = std::min<std::uint64_t>(high / k64Kib, 0xffffff);
  put16(cmos_, kCmosMemAbove4G, above_4g & 0xffff);
  cmos_[kCmosMemAbove4G + 2u] = static_cast<std::uint8_t>(above_4g >> 16);

  unsigned sum = 0;
  for (unsigned i = kCmosChecksumFirst; i <= kCmosChecksumLast; ++i) sum += cmos_[i];
  cmos_[kCmosChecksumHigh] = static_cast<std::uint8_t>((sum >> 8) & 0xff);
  cmos_[kCmosChecksumHigh + 1u] = static_cast<std::uint8_t>(sum & 0xff);

  last_scan_ = rtc_at(host_clock_.now());
}

RtcStats Mc146818Rtc::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Mc146818Rtc::report(ReportWriter& out) const {
  const RtcStats s = stats();
  out.count("periodic_irqs", s.periodic_irqs);
  out.count("alarm_irqs", s.alarm_irqs);
  out.count("update_irqs", s.update_irqs);
  out.count("reg_c_reads", s.reg_c_reads);
  out.count("timer_arms", s.timer_arms);
  out.count("bad_accesses", s.bad_accesses);
}

bool Mc146818Rtc::nmi_masked() const {
  std::lock_guard lock(mu_);
  return nmi_masked_;
}

// Wider accesses are split into byte cycles as the ISA bus does (outw 0x70 writes the index and
// then the data port); bytes past offset 1 go nowhere and read as ones.
void Mc146818Rtc::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  if (data.size() != 1 || offset >= kPortCount) ++stats_.bad_accesses;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::size_t port = std::size_t{offset} + i;
    // Port 0x70 is write-only on a PC; reads float high (QEMU answers 0xff too).
    data[i] = port == 1 ? read_data(host_clock_.now()) : 0xff;
  }
}

void Mc146818Rtc::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  if (data.size() != 1 || offset >= kPortCount) ++stats_.bad_accesses;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::size_t port = std::size_t{offset} + i;
    if (port == 0) {
      index_ = data[i] & kIndexMask;
      nmi_masked_ = (data[i] & kNmiDisable) != 0;
    } else if (port == 1) {
      write_data(host_clock_.now(), data[i]);
    }
  }
}

std::uint8_t Mc146818Rtc::read_data(Nanos host) noexcept {
  const Nanos rtc = rtc_at(host);
  scan_flags(rtc, true);
  if (is_time_reg(index_)) return held() ? cmos_[index_] : time_reg(rtc, index_);
  switch (index_) {
    case kRegA: {
      const bool uip = !held() && floor_mod(rtc.count(), kNsPerSecond) >= kNsPerSecond - kUipLeadNs;
      return static_cast<std::uint8_t>(reg_a_ | (uip ? kRegAUip : 0));
    }
    case kRegB:
      return reg_b_;
    case kRegC: {
      ++stats_.reg_c_reads;
      const auto c = static_cast<std::uint8_t>(flags_ | (irqf_ ? kRegCIrqf : 0));
      flags_ = 0;
      irqf_ = false;
      return c;
    }
    case kRegD:
      return kRegDVrt;
    default:
      return cmos_[index_];
  }
}

void Mc146818Rtc::write_data(Nanos host, std::uint8_t value) noexcept {
  scan_flags(rtc_at(host), true);
  if (is_time_reg(index_)) {
    write_time_reg(host, index_, value);
    return;
  }
  switch (index_) {
    case kRegA:
      write_reg_a(host, value);
      return;
    case kRegB:
      write_reg_b(host, value);
      return;
    case kRegC:
    case kRegD:
      return;  // read-only
    default:
      // Plain RAM, the alarm registers included: flags up to now were set with the old alarm.
      cmos_[index_] = value;
      return;
  }
}

void Mc146818Rtc::write_time_reg(Nanos host, std::uint8_t index, std::uint8_t value) noexcept {
  if (held()) {
    cmos_[index] = value;
    return;
  }
  // A write while the clock runs takes effect at once (as in QEMU); the next update would
  // otherwise carry on from it anyway.
  freeze_time(host);
  cmos_[index] = value;
  release_time(host);
  last_scan_ = rtc_at(host);
  program_timer(host, true);
}

void Mc146818Rtc::write_reg_a(Nanos host, std::uint8_t value) noexcept {
  const bool was_running = divider_running();
  const bool was_held = held();
  reg_a_ = value & static_cast<std::uint8_t>(~kRegAUip);  // UIP is read-only
  bool moved = false;
  if (!was_held && held()) freeze_time(host);
  if (!was_running && divider_running()) {
    // Leaving divider reset: "the first update cycle begins one-half second later".
    const std::int64_t phase = floor_mod(rtc_at(host).count(), kNsPerSecond);
    offset_ += Nanos{kHalfSecondNs - phase};
    moved = true;
  }
  if (was_held && !held()) {
    release_time(host);
    moved = true;
  }
  if (moved) last_scan_ = rtc_at(host);
  program_timer(host, moved);
}

void Mc146818Rtc::write_reg_b(Nanos host, std::uint8_t value) noexcept {
  const bool was_held = held();
  std::uint8_t b = value;
  // "UIE is cleared to zero when the SET bit goes high" (register B, UIE).
  if (b & kRegBSet) b &= static_cast<std::uint8_t>(~kRegBUie);
  // Freeze with the old format: the registers keep the bytes the last update wrote.
  if (!was_held && (b & kRegBSet)) freeze_time(host);
  reg_b_ = b;
  bool moved = false;
  if (was_held && !held()) {
    release_time(host);
    last_scan_ = rtc_at(host);
    moved = true;
  }
  update_irqf();  // IRQF follows the enables for flags already set
  program_timer(host, moved);
}

bool Mc146818Rtc::divider_running() const noexcept {
  const auto dv = static_cast<std::uint8_t>((reg_a_ >> kRegADividerShift) & kRegADividerMask);
  return (dv & kDividerReset) != kDividerReset;
}

bool Mc146818Rtc::set_mode() const noexcept { return (reg_b_ & kRegBSet) != 0; }

std::uint8_t Mc146818Rtc::to_reg(int value) const noexcept {
  if (reg_b_ & kRegBDm) return static_cast<std::uint8_t>(value);
  return static_cast<std::uint8_t>(((value / 10) << 4) | (value % 10));
}

int Mc146818Rtc::from_reg(std::uint8_t value) const noexcept {
  if (reg_b_ & kRegBDm) return value;
  return (value >> 4) * 10 + (value & 0x0f);
}

std::uint8_t Mc146818Rtc::hour_to_reg(int hour) const noexcept {
  if (reg_b_ & kRegB24h) return to_reg(hour);
  // 12-hour mode: 12 AM, 1 AM ... 11 AM, 12 PM, 1 PM ... with bit 7 marking PM.
  const int h12 = hour % 12 == 0 ? 12 : hour % 12;
  return static_cast<std::uint8_t>(to_reg(h12) | (hour >= 12 ? kHourPm : 0));
}

std::uint8_t Mc146818Rtc::time_reg(Nanos rtc, std::uint8_t index) const noexcept {
  const Civil c = civil_from(rtc);
  switch (index) {
    case kRegSeconds:
      return to_reg(c.second);
    case kRegMinutes:
      return to_reg(c.minute);
    case kRegHours:
      return hour_to_reg(c.hour);
    case kRegDayOfWeek:
      return to_reg(c.weekday);
    case kRegDayOfMonth:
      return to_reg(c.day);
    case kRegMonth:
      return to_reg(c.month);
    case kRegYear:
      return to_reg(c.year % 100);
    case kRegCentury:
      return to_reg(c.year / 100);
    default:
      return 0;
  }
}

void Mc146818Rtc::freeze_time(Nanos host) noexcept {
  const Nanos rtc = rtc_at(host);
  for (std::uint8_t i : {kRegSeconds, kRegMinutes, kRegHours, kRegDayOfWeek, kRegDayOfMonth,
                         kRegMonth, kRegYear, kRegCentury}) {
    cmos_[i] = time_reg(rtc, i);
  }
}

void Mc146818Rtc::release_time(Nanos host) noexcept {
  bool valid = true;
  // Decodes one register; BCD digits above 9 and out-of-range values are clamped (on the chip
  // they make the counters misbehave, which no guest relies on).
  const auto field = [&](std::uint8_t raw, int lo, int hi) {
    if (!(reg_b_ & kRegBDm) && ((raw & 0x0f) > 9 || (raw >> 4) > 9)) valid = false;
    const int v = from_reg(raw);
    if (v < lo || v > hi) valid = false;
    return std::clamp(v, lo, hi);
  };
  Civil c{};
  c.second = field(cmos_[kRegSeconds], 0, 59);
  c.minute = field(cmos_[kRegMinutes], 0, 59);
  if (reg_b_ & kRegB24h) {
    c.hour = field(cmos_[kRegHours], 0, 23);
  } else {
    const std::uint8_t raw = cmos_[kRegHours];
    const int h12 = field(static_cast<std::uint8_t>(raw & ~kHourPm), 1, 12);
    c.hour = h12 % 12 + ((raw & kHourPm) ? 12 : 0);
  }
  c.month = field(cmos_[kRegMonth], 1, 12);
  const int year = field(cmos_[kRegCentury], 0, 99) * 100 + field(cmos_[kRegYear], 0, 99);
  if (year < kMinYear || year > kMaxYear) valid = false;
  c.year = std::clamp(year, kMinYear, kMaxYear);
  namespace chr = std::chrono;
  const auto last_day = chr::year_month_day_last{
      chr::year{c.year}, chr::month_day_last{chr::month{static_cast<unsigned>(c.month)}}};
  c.day = field(cmos_[kRegDayOfMonth], 1, static_cast<int>(static_cast<unsigned>(last_day.day())));
  if (!valid) ++stats_.invalid_time_sets;

  // The divider kept counting while the time was held: keep its sub-second phase.
  const std::int64_t phase = floor_mod(rtc_at(host).count(), kNsPerSecond);
  offset_ = Nanos{epoch_seconds(c) * kNsPerSecond + phase} - host;
}

}  // namespace minivmm::devices
