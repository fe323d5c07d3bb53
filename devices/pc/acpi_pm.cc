#include "devices/pc/acpi_pm.h"

#include <algorithm>
#include <cstdint>

namespace minivmm::devices {
namespace {

using timers::Nanos;

constexpr std::uint64_t kNsPerSecond = 1'000'000'000;

// The first vm_clock instant at which the count has reached `ticks` (whole periods of the
// clock, then the rest: every product fits in 64 bits).
Nanos instant_of(std::uint64_t ticks) noexcept {
  const std::uint64_t seconds = ticks / AcpiPm::kTimerHz;
  const std::uint64_t rest = ticks % AcpiPm::kTimerHz;
  const std::uint64_t ns = seconds * kNsPerSecond +
                           (rest * kNsPerSecond + AcpiPm::kTimerHz - 1) / AcpiPm::kTimerHz;
  return Nanos{static_cast<std::int64_t>(std::min<std::uint64_t>(ns, INT64_MAX))};
}

std::uint64_t next_flip_after(std::uint64_t ticks) noexcept {
  return (ticks / AcpiPm::kFlipTicks + 1) * AcpiPm::kFlipTicks;
}

}  // namespace

AcpiPm::AcpiPm(timers::TimerList& vm_timers, IrqLine& sci, Callbacks callbacks)
    : vm_timers_(vm_timers),
      sci_(sci),
      callbacks_(std::move(callbacks)),
      next_flip_(next_flip_after(ticks_at(vm_timers.clock().now()))),
      timer_(vm_timers, "acpi-pm-tmr", [this](const timers::Timer::Expiry& e) { on_timer(e); }) {}

// QEMU: muldiv64(ns, PM_TIMER_FREQUENCY, NANOSECONDS_PER_SECOND), split into whole seconds and
// the rest so that nothing overflows. vm_clock never reads below 0; a fake's negative reading
// counts as 0.
std::uint64_t AcpiPm::ticks_at(Nanos vm) noexcept {
  if (vm.count() <= 0) return 0;
  const auto ns = static_cast<std::uint64_t>(vm.count());
  return ns / kNsPerSecond * kTimerHz + ns % kNsPerSecond * kTimerHz / kNsPerSecond;
}

std::uint32_t AcpiPm::count_at(Nanos vm) noexcept {
  return static_cast<std::uint32_t>(ticks_at(vm) & 0xffffff);
}

void AcpiPm::scan_overflow(Nanos now) noexcept {
  const std::uint64_t ticks = ticks_at(now);
  if (ticks < next_flip_) return;
  sts_ |= kTmrSts;
  ++stats_.timer_overflows;
  next_flip_ = next_flip_after(ticks);
}

void AcpiPm::program_timer() noexcept {
  if ((en_ & kTmrEn) == 0) {
    timer_.cancel();
    return;
  }
  const Nanos at = instant_of(next_flip_);
  if (timer_.pending() && timer_.deadline() == at) return;
  timer_.arm_at(at);
}

void AcpiPm::update_sci() noexcept {
  const bool level = (sts_ & en_ & kSciCauses) != 0;
  if (level == sci_level_) return;
  sci_level_ = level;
  if (level) ++stats_.sci_raised;
  sci_.set_level(level);
}

void AcpiPm::on_timer(const timers::Timer::Expiry& expiry) {
  std::lock_guard lock(mu_);
  scan_overflow(std::max(expiry.now, expiry.deadline));
  update_sci();
  program_timer();
}

std::uint8_t AcpiPm::read_byte(std::uint16_t offset, Nanos now) noexcept {
  const auto byte_of = [](std::uint32_t v, unsigned i) {
    return static_cast<std::uint8_t>(v >> (8 * i));
  };
  if (offset < kPm1EvtOffset + 2) return byte_of(sts_, offset - kPm1EvtOffset);
  if (offset < kPm1EvtOffset + kPm1EvtLen) return byte_of(en_, offset - kPm1EvtOffset - 2);
  if (offset >= kPm1CntOffset && offset < kPm1CntOffset + kPm1CntLen) {
    return byte_of(cnt_ | kSciEn, offset - kPm1CntOffset);
  }
  if (offset >= kPmTmrOffset && offset < kPmTmrOffset + kPmTmrLen) {
    return byte_of(count_at(now), offset - kPmTmrOffset);
  }
  ++stats_.bad_accesses;
  return 0xff;
}

void AcpiPm::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  const Nanos now = vm_timers_.clock().now();
  // PM1_STS shows a flip the moment the count passed it, timer or not (QEMU reads it so).
  scan_overflow(now);
  bool timer = false;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::uint32_t o = offset + static_cast<std::uint32_t>(i);
    if (o > 0xffff) {
      data[i] = 0xff;
      ++stats_.bad_accesses;
      continue;
    }
    if (o >= kPmTmrOffset && o < kPmTmrOffset + kPmTmrLen) timer = true;
    data[i] = read_byte(static_cast<std::uint16_t>(o), now);
  }
  if (timer) ++stats_.timer_reads;
  update_sci();
  program_timer();
}

void AcpiPm::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  int sleep = -1;
  {
    std::lock_guard lock(mu_);
    scan_overflow(vm_timers_.clock().now());
    std::uint16_t clear = 0;
    std::uint16_t en = en_;
    std::uint16_t cnt = cnt_;
    bool cnt_written = false;
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::uint32_t o = offset + static_cast<std::uint32_t>(i);
      const unsigned shift = 8 * (o & 1);
      const auto byte = static_cast<std::uint16_t>(data[i] << shift);
      const auto keep = static_cast<std::uint16_t>(~(0xffu << shift));
      if (o < kPm1EvtOffset + 2) {
        clear |= byte;  // write 1 to clear
      } else if (o < kPm1EvtOffset + kPm1EvtLen) {
        en = static_cast<std::uint16_t>((en & keep) | byte);
      } else if (o >= kPm1CntOffset && o < kPm1CntOffset + kPm1CntLen) {
        cnt = static_cast<std::uint16_t>((cnt & keep) | byte);
        cnt_written = true;
      } else {
        ++stats_.bad_accesses;  // the read-only timer, or no register
      }
    }
    sts_ = static_cast<std::uint16_t>(sts_ & ~clear);
    en_ = en;
    if (cnt_written) sleep = write_cnt(cnt);
    update_sci();
    program_timer();
  }
  // Outside the lock: the machine stops or parks this vCPU from here.
  if (sleep == kSlpTypS5 && callbacks_.on_power_off) callbacks_.on_power_off();
  if (sleep == kSlpTypS3 && callbacks_.on_suspend) callbacks_.on_suspend();
}

int AcpiPm::write_cnt(std::uint16_t value) noexcept {
  // SLP_EN and GBL_RLS are write-only strobes; SCI_EN is wired on (no SMI_CMD to enable it).
  cnt_ = static_cast<std::uint16_t>((value & ~(kSlpEn | kGblRls)) | kSciEn);
  if ((value & kSlpEn) == 0) return -1;
  const int type = (value & kSlpTypMask) >> kSlpTypShift;
  if (type == kSlpTypS5) {
    ++stats_.power_offs;
    return type;
  }
  if (type == kSlpTypS3) {
    ++stats_.suspends;
    return type;
  }
  ++stats_.unknown_sleeps;  // QEMU's S4 is off by default, and we offer no _S4
  return -1;
}

void AcpiPm::wake(WakeReason reason) noexcept {
  std::lock_guard lock(mu_);
  sts_ |= kWakSts;
  if (reason == WakeReason::kRtc) sts_ |= kRtcSts;
  ++stats_.wakes;
  update_sci();
}

bool AcpiPm::rtc_wake_enabled() const {
  std::lock_guard lock(mu_);
  return (en_ & kRtcEn) != 0;
}

AcpiPmStats AcpiPm::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void AcpiPm::report(ReportWriter& out) const {
  const AcpiPmStats s = stats();
  out.count("timer_reads", s.timer_reads);
  out.count("timer_overflows", s.timer_overflows);
  out.count("sci_raised", s.sci_raised);
  out.count("suspends", s.suspends);
  out.count("power_offs", s.power_offs);
  out.count("wakes", s.wakes);
  out.count("unknown_sleeps", s.unknown_sleeps);
  out.count("bad_accesses", s.bad_accesses);
}

}  // namespace minivmm::devices
