// Emulates the Motorola MC146818A real-time clock and its 128 bytes of CMOS RAM as on a PC: index
// port 0x70 (bit 7 is the NMI mask) and data port 0x71, seen here as offsets 0 and 1; IRQ8.
// Data sheet: "MC146818A Real-Time Clock Plus RAM (RTC)" (Motorola); PC usage after the IBM AT
// Technical Reference (CMOS map) and QEMU hw/rtc/mc146818rtc.c.
//
// Modelled: time and date registers in BCD or binary (DM), 12 or 24 hour (hour bit 7 = PM),
// day of week, century (0x32); SET semantics (updates stop, writes go to the registers, the
// written time starts running when SET clears); register A's UIP (computed from the time: high
// for the 244 us before each update, no timer), divider reset and rate select for periodic
// interrupts at every rate; register B; register C's IRQF/PF/AF/UF, cleared on read; register D
// with VRT; alarms with don't-care values (0xC0-0xFF); the PC memory-size fields.
//
// Time is the host clock (wall time) plus an offset that changes only when the guest writes the
// time; the guest's clock keeps running while the VM is paused, as QEMU's default "-rtc
// clock=host" does. Interrupts are scheduled on vm_clock by one timer, armed only while an
// interrupt is enabled, periodic so that a steady rate costs no re-arm: at the periodic rate
// with PIE, else once per second for UIE/AIE. (Rates 3-6, whose periods are not whole ns, are
// re-laid once per second so that they stay exact; see arm_after().) Flags that no enabled
// interrupt needs (PF with PIE off, UF, AF) are computed lazily from elapsed time when the guest
// looks (data sheet: the flags are set whatever the enable bits).
//
// Deliberately missing: the square-wave output (SQWE is stored only), daylight saving (DSE is
// stored only), time bases other than 32.768 kHz (divider values other than reset are treated
// as 32.768 kHz), the 1984 us update cycle itself (the registers change at the second boundary
// and UIP covers only the 244 us before it), and a stored day of week (it is recomputed from the
// date, so a guest that writes a wrong weekday reads the right one back once SET clears).
// Years are limited to 1970-2199.
//
// IRQ8: the chip's IRQ# pin is a level, asserted while IRQF is 1 and released by reading C. On
// a PC that pin reaches the interrupt controller as an edge (8259 IRQ8 is edge-triggered, and
// the IOAPIC's ISA IRQ 8 is edge, active high), so the model pulses the line each time IRQF
// rises. A guest that never reads C gets no further interrupts, as on hardware.
//
// Threads: read()/write() on vCPU threads, the timer callback on the loop thread; mu_ guards
// everything. Lock order: mu_ -> TimerList mutex. The IrqLine is called with mu_ held.
//
// Files: the register file in mc146818_rtc.cc, the flags and the interrupt timer in
// mc146818_rtc_interrupts.cc, the register map (mc146818_rtc_regs.h) and the grid and calendar
// arithmetic (mc146818_rtc_time.h) that both use.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/irq_line.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"
#include "timers/clock.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::devices {

struct RtcStats {
  std::uint64_t periodic_irqs = 0;  // IRQ8 edges with PF·PIE among the causes
  std::uint64_t alarm_irqs = 0;     // ... with AF·AIE
  std::uint64_t update_irqs = 0;    // ... with UF·UIE
  std::uint64_t reg_c_reads = 0;
  std::uint64_t bad_accesses = 0;       // accesses wider than a byte, or past offset 1
  std::uint64_t timer_arms = 0;         // interrupt timer (re)arms: a steady rate costs one
  std::uint64_t invalid_time_sets = 0;  // written times that were not a valid date (clamped)
};

class Mc146818Rtc final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  static constexpr std::uint16_t kPortCount = 2;
  static constexpr unsigned kIrq = 8;
  // RAM above this address lives above 4 GiB (the 32-bit MMIO hole starts here): the VMM's
  // layout caps low RAM at 3 GiB.
  static constexpr std::uint64_t kDefaultLowRamCeiling = 3ull << 30;

  // `vm_timers` (vm_clock), `host_clock` (wall time) and `irq8` must outlive the device.
  Mc146818Rtc(timers::TimerList& vm_timers, const timers::Clock& host_clock, IrqLine& irq8,
              std::uint64_t ram_size_bytes, std::uint64_t low_ram_ceiling = kDefaultLowRamCeiling);
  Mc146818Rtc(const Mc146818Rtc&) = delete;
  Mc146818Rtc& operator=(const Mc146818Rtc&) = delete;

  std::string_view name() const noexcept override { return report_key(); }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  RtcStats stats() const;

  // ReportingDevice: stats() under "rtc", all but invalid_time_sets (kept for the log and the
  // tests; the report never had it).
  std::string_view report_key() const noexcept override { return "rtc"; }
  void report(ReportWriter& out) const override;
  // StatefulDevice (mc146818_rtc_state.cc). Wall time is not in the record, only the guest's
  // offset from the host's wall clock (0 unless the guest set the time): a restored RTC reads
  // the host's time then, as a PC's CMOS clock kept running while the machine was off. The
  // interrupt timer goes on from its saved vm_clock deadline, on the same grid; its
  // once-a-second check finds the wall clock moved on and re-anchors, as after a pause.
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

  // The host (wall) clock instant of the next second whose time matches the alarm, while the
  // alarm interrupt is enabled (AIE) and the clock runs; nullopt otherwise. The machine wakes a
  // guest asleep in S3 at it: vm_clock, which drives the RTC's own timer, stands still then.
  std::optional<timers::Nanos> next_alarm_host() const;

  // Bit 7 of the last index written: the chipset's NMI mask (stored; NMIs are not modelled).
  bool nmi_masked() const;

 private:
  using Nanos = timers::Nanos;

  std::uint8_t read_data(Nanos host) noexcept;
  void write_data(Nanos host, std::uint8_t value) noexcept;
  void write_reg_a(Nanos host, std::uint8_t value) noexcept;
  void write_reg_b(Nanos host, std::uint8_t value) noexcept;
  void write_time_reg(Nanos host, std::uint8_t index, std::uint8_t value) noexcept;

  Nanos rtc_at(Nanos host) const noexcept { return host + offset_; }
  bool divider_running() const noexcept;
  bool set_mode() const noexcept;
  // Updates are stopped: SET, or the divider held in reset.
  bool held() const noexcept { return set_mode() || !divider_running(); }
  // The time-register value for `index` at RTC time `rtc`, in the current format.
  std::uint8_t time_reg(Nanos rtc, std::uint8_t index) const noexcept;
  std::uint8_t to_reg(int value) const noexcept;
  int from_reg(std::uint8_t value) const noexcept;
  std::uint8_t hour_to_reg(int hour) const noexcept;
  // Copies the running time into the time registers (SET rises, divider enters reset).
  void freeze_time(Nanos host) noexcept;
  // Starts the clock from the time registers, keeping the sub-second phase.
  void release_time(Nanos host) noexcept;

  // Sets PF/UF/AF for every event in (last_scan_, rtc], then recomputes IRQF. `from_access`:
  // `rtc` is the clock's reading, not a timer's grid point (only then may time step back).
  void scan_flags(Nanos rtc, bool from_access) noexcept;
  bool alarm_between(std::int64_t first_second, std::int64_t last_second) const noexcept;
  // The one place that drives IRQ8: pulses when IRQF rises.
  void update_irqf() noexcept;

  // The interrupt timer's grid that the registers call for (cycles), 0 when none.
  std::uint32_t timer_cycles_wanted() const noexcept;
  // 32.768 kHz cycles between periodic interrupts for the current rate; 0 = off.
  std::uint32_t periodic_cycles() const noexcept;
  // Arms, re-anchors or cancels the interrupt timer. Without `force` nothing happens unless what
  // the timer must do changed.
  void program_timer(Nanos host, bool force) noexcept;
  // Arms the timer for the grid of `cycles` from RTC time `rtc`, which is vm_clock time `vm`.
  void arm_after(Nanos rtc, Nanos vm, std::uint32_t cycles) noexcept;
  void on_timer(const timers::Timer::Expiry& expiry);

  timers::TimerList& vm_timers_;
  const timers::Clock& host_clock_;
  IrqLine& irq_;

  mutable std::mutex mu_;  // lock order: mu_ -> TimerList mutex

  // CMOS RAM. The time registers (0x00-0x09, 0x32) are meaningful here only while held():
  // otherwise reads compute them from the clock. 0x0A-0x0D are kept in their own fields.
  std::array<std::uint8_t, 128> cmos_{};
  std::uint8_t index_ = 0;
  bool nmi_masked_ = false;
  std::uint8_t reg_a_;  // without UIP
  std::uint8_t reg_b_;
  std::uint8_t flags_ = 0;  // register C's PF/AF/UF
  bool irqf_ = false;

  Nanos offset_{0};     // RTC time (ns since 1970, as the guest's clock reads) minus host time
  Nanos last_scan_{0};  // RTC time up to which flags have been set

  // The armed timer: its grid in RTC time (periodic_cycles(), or a second) and the anchor that
  // maps its vm_clock deadlines to RTC time.
  bool timer_on_ = false;
  std::uint32_t timer_cycles_ = 0;
  Nanos anchor_vm_{0};
  Nanos anchor_rtc_{0};

  RtcStats stats_;
  timers::Timer timer_;  // last: destroyed (cancelled) first
};

}  // namespace minivmm::devices
