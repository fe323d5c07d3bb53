// AcpiPm's snapshot record. The count is vm_clock's (set back to the snapshot instant before
// devices load), so the record holds only the registers, the tick of the next bit-23 flip, the
// SCI level and the counters; the overflow timer is re-armed from them.
#include "devices/pc/acpi_pm.h"

#include <string>

namespace minivmm::devices {
namespace {

constexpr std::uint8_t kAcpiPmStateVersion = 1;
// The status bits the device ever sets.
constexpr std::uint16_t kStsBits = AcpiPm::kTmrSts | AcpiPm::kRtcSts | AcpiPm::kWakSts;

}  // namespace

void AcpiPm::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, kAcpiPmStateVersion);
  out.u16(sts_);
  out.u16(en_);
  out.u16(cnt_);
  out.u64(next_flip_);
  out.boolean(sci_level_);
  out.u64(stats_.timer_reads);
  out.u64(stats_.timer_overflows);
  out.u64(stats_.sci_raised);
  out.u64(stats_.suspends);
  out.u64(stats_.power_offs);
  out.u64(stats_.wakes);
  out.u64(stats_.unknown_sleeps);
  out.u64(stats_.bad_accesses);
}

void AcpiPm::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  read_version(in, kAcpiPmStateVersion);
  const std::uint16_t sts = in.u16();
  const std::uint16_t en = in.u16();
  const std::uint16_t cnt = in.u16();
  const std::uint64_t next_flip = in.u64();
  const bool sci_level = in.boolean();
  AcpiPmStats s;
  s.timer_reads = in.u64();
  s.timer_overflows = in.u64();
  s.sci_raised = in.u64();
  s.suspends = in.u64();
  s.power_offs = in.u64();
  s.wakes = in.u64();
  s.unknown_sleeps = in.u64();
  s.bad_accesses = in.u64();
  in.expect_end();

  if ((sts & ~kStsBits) != 0) in.fail("PM1_STS bits the device never sets");
  if ((cnt & kSciEn) == 0) in.fail("PM1_CNT without SCI_EN, which is wired on");
  if ((cnt & (kSlpEn | kGblRls)) != 0) in.fail("PM1_CNT holds a write-only strobe");
  // The next flip is on the 2^23 grid and no further than one flip past the count now (it
  // lags when nothing looked for a while, never leads).
  const std::uint64_t now_ticks = ticks_at(vm_timers_.clock().now());
  if (next_flip == 0 || next_flip % kFlipTicks != 0 ||
      next_flip > (now_ticks / kFlipTicks + 1) * kFlipTicks) {
    in.fail("a timer flip at tick " + std::to_string(next_flip) + " off the count's grid");
  }
  if (sci_level != ((sts & en & kSciCauses) != 0)) {
    in.fail("an SCI level that disagrees with PM1_STS and PM1_EN");
  }
  sts_ = sts;
  en_ = en;
  cnt_ = cnt;
  next_flip_ = next_flip;
  sci_level_ = sci_level;
  stats_ = s;
  // A level line: the restored controller is told again (KVM keeps each source's level apart).
  if (sci_level_) sci_.set_level(true);
  program_timer();
}

}  // namespace minivmm::devices
