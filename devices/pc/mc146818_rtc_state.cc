// Mc146818Rtc's snapshot record. Times in it are of three kinds, each restored in its own
// terms: the guest's offset from the host's wall clock (so a restored RTC shows the host's time,
// plus whatever the guest set), RTC time up to which flags are set (older than the restore's
// wall time: the events in between are flagged at the guest's next look, as after a pause),
// and the interrupt timer's vm_clock deadline and anchor (vm_clock is set back to the snapshot
// instant before devices load, so the periodic phase goes on where it stopped).
#include "devices/pc/mc146818_rtc.h"
#include "devices/pc/mc146818_rtc_regs.h"
#include "devices/pc/mc146818_rtc_time.h"

namespace minivmm::devices {

using namespace mc146818;

namespace {

using timers::Nanos;

constexpr std::uint8_t kRtcStateVersion = 1;
constexpr std::uint8_t kFlagBits = kRegCPf | kRegCAf | kRegCUf;
// RTC times the device can reach: years 1970-2199 (release_time clamps to them), so an offset
// from a host clock in that range too stays far from int64 overflow. 2200-01-01 in ns.
constexpr std::int64_t kMaxRtcNs = 7'258'118'400LL * kNsPerSecond;
// vm_clock instants: at most ~146 years of uptime, far more than any host has.
constexpr std::int64_t kMaxVmNs = std::int64_t{1} << 62;

}  // namespace

void Mc146818Rtc::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, kRtcStateVersion);
  out.bytes(cmos_);
  out.u8(index_);
  out.boolean(nmi_masked_);
  out.u8(reg_a_);
  out.u8(reg_b_);
  out.u8(flags_);
  out.boolean(irqf_);
  out.i64(offset_.count());
  out.i64(last_scan_.count());
  out.boolean(timer_on_);
  out.u32(timer_cycles_);
  out.i64(anchor_vm_.count());
  out.i64(anchor_rtc_.count());
  out.i64(timer_on_ && timer_.pending() ? timer_.deadline().count() : 0);
  out.i64(host_clock_.now().count());
  out.u64(stats_.periodic_irqs);
  out.u64(stats_.alarm_irqs);
  out.u64(stats_.update_irqs);
  out.u64(stats_.reg_c_reads);
  out.u64(stats_.bad_accesses);
  out.u64(stats_.timer_arms);
  out.u64(stats_.invalid_time_sets);
}

void Mc146818Rtc::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  read_version(in, kRtcStateVersion);
  std::array<std::uint8_t, 128> cmos{};
  in.fixed_bytes(cmos);
  const std::uint8_t index = in.u8();
  const bool nmi_masked = in.boolean();
  const std::uint8_t reg_a = in.u8();
  const std::uint8_t reg_b = in.u8();
  const std::uint8_t flags = in.u8();
  const bool irqf = in.boolean();
  const Nanos offset{in.i64()};
  const Nanos last_scan{in.i64()};
  const bool timer_on = in.boolean();
  const std::uint32_t cycles = in.u32();
  const Nanos anchor_vm{in.i64()};
  const Nanos anchor_rtc{in.i64()};
  const Nanos deadline{in.i64()};
  const Nanos saved_host{in.i64()};
  RtcStats stats;
  stats.periodic_irqs = in.u64();
  stats.alarm_irqs = in.u64();
  stats.update_irqs = in.u64();
  stats.reg_c_reads = in.u64();
  stats.bad_accesses = in.u64();
  stats.timer_arms = in.u64();
  stats.invalid_time_sets = in.u64();
  in.expect_end();

  if (index > 0x7f) in.fail("CMOS index " + std::to_string(index));
  if ((reg_a & kRegAUip) != 0) in.fail("register A holds UIP, which is computed");
  if ((reg_b & kRegBSet) != 0 && (reg_b & kRegBUie) != 0) in.fail("register B has SET and UIE");
  if ((flags & ~kFlagBits) != 0) in.fail("register C flags outside PF/AF/UF");
  const auto in_range = [](Nanos t, std::int64_t max) { return t.count() >= -max && t.count() <= max; };
  // RTC and wall-clock instants: 1970-2199, which the live device never leaves. So every
  // difference of two of them fits in an int64, and so does one plus a vm_clock span.
  const auto rtc_time = [](Nanos t) { return t.count() >= 0 && t.count() <= kMaxRtcNs; };
  if (!in_range(offset, kMaxRtcNs)) in.fail("a wall-clock offset of " + std::to_string(offset.count()) + " ns");
  if (!rtc_time(last_scan) || !rtc_time(anchor_rtc) || !rtc_time(saved_host) ||
      !rtc_time(host_clock_.now() + offset)) {
    in.fail("an RTC time outside 1970-2199");
  }
  if (anchor_vm.count() < 0 || anchor_vm.count() > kMaxVmNs || deadline.count() < 0 ||
      deadline.count() > kMaxVmNs) {
    in.fail("a vm_clock instant out of range");
  }

  cmos_ = cmos;
  index_ = index;
  nmi_masked_ = nmi_masked;
  reg_a_ = reg_a;
  reg_b_ = reg_b;
  flags_ = flags;
  // The line is an edge: the one for a raised IRQF went out before the snapshot.
  const bool pf = (flags & kRegCPf) && (reg_b & kRegBPie);
  const bool af = (flags & kRegCAf) && (reg_b & kRegBAie);
  const bool uf = (flags & kRegCUf) && (reg_b & kRegBUie);
  if (irqf != (pf || af || uf)) in.fail("IRQF disagrees with the flags and their enables");
  irqf_ = irqf;
  offset_ = offset;
  last_scan_ = last_scan;
  stats_ = stats;

  // The timer runs exactly when the registers call for it, at the grid they call for.
  const std::uint32_t wanted = timer_cycles_wanted();
  if (timer_on != (wanted != 0)) in.fail("the interrupt timer's state disagrees with A and B");
  if (!timer_on) {
    if (cycles != 0 || deadline != Nanos{0}) in.fail("a grid for a timer that is off");
    return;
  }
  // program_timer() re-lays the grid whenever the registers change it.
  if (cycles != wanted) in.fail("an interrupt grid of " + std::to_string(cycles) + " cycles");
  const Nanos period{std::int64_t{cycles} * kNsPerSecond / kBaseHz};
  if (deadline < anchor_vm || (deadline - anchor_vm) % period != Nanos{0}) {
    in.fail("a timer deadline off its grid");
  }
  timer_on_ = true;
  timer_cycles_ = cycles;
  anchor_vm_ = anchor_vm;
  // The wall clock moved on while the snapshot lay on disk and vm_clock did not: the grid's
  // RTC side moves on with it (by whole seconds, where every grid has a point), so the timer's
  // next expiries map to RTC time after the restore and keep setting PF on the same vm_clock
  // grid. The once-a-second check re-anchors what is left (the sub-second part).
  // Both instants are 1970-2199 (checked above, and the host's clock is a clock), so
  // their difference fits; the sum with the anchor may not, hence the checked add.
  const Nanos moved{floor_div((host_clock_.now() - saved_host).count(), kNsPerSecond) *
                    kNsPerSecond};
  std::int64_t moved_anchor = 0;
  if (__builtin_add_overflow(anchor_rtc.count(), moved.count(), &moved_anchor) ||
      !rtc_time(Nanos{moved_anchor})) {
    in.fail("a wall clock that moved out of 1970-2199");
  }
  // The grid's RTC time at the next deadline (on_timer's `predicted`) is an RTC time too.
  if (deadline - anchor_vm > Nanos{kMaxRtcNs - moved_anchor}) {
    in.fail("a timer deadline beyond 2199 on the RTC's grid");
  }
  anchor_rtc_ = Nanos{moved_anchor};
  timer_.arm_periodic(deadline, period);
}

}  // namespace minivmm::devices
