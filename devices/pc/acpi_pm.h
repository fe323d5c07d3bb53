// The ACPI fixed-hardware power-management block of QEMU's pc machine (the PIIX4 PM function,
// hw/acpi/piix4.c and hw/acpi/core.c), at QEMU's PM_IO_BASE 0x600: PM1a event (PM1_STS at
// offset 0, PM1_EN at 2, 16 bits each), PM1a control (PM1_CNT at 4, 16 bits) and the PM timer
// (PM_TMR at 8, 24 bits in a 32-bit register). ACPI 6.5 chapter 4.8 has the registers.
//
// The PM timer counts at 3.579545 MHz from vm_clock's zero, computed on each read as QEMU's
// acpi_pm_tmr_get_clock() does (no timer ticks it), so it stands still while the VM is paused or
// asleep and a restored VM reads on from where its snapshot stood (vm_clock is set back first).
// TMR_STS rises when bit 23 of the count flips (every 2^23 ticks, 2.34 s); a vm_clock timer is
// armed for the next flip only while TMR_EN asks for the interrupt, otherwise the flag is found
// when the guest reads PM1_STS.
//
// The SCI (GSI 9) is a level, high while any of TMR/PWRBTN/GBL/RTC status has its enable set,
// as QEMU's acpi_update_sci(). Status bits are write-1-to-clear; SCI_EN reads 1 (the FADT's
// SMI_CMD is 0: always in ACPI mode).
//
// SLP_EN with SLP_TYP as the DSDT's _S5 (0) calls `on_power_off`, as _S3 (1) calls `on_suspend`
// (QEMU's acpi_pm1_cnt_write); other types are counted and ignored (no _S4 is offered). wake()
// is the machine's resume: WAK_STS (and RTC_STS for an RTC alarm) rises as the guest resumes.
//
// Access widths: every byte of an access goes to the register byte it covers, as the chipset
// decodes byte enables, so an access of any width at any offset is well defined; the bytes
// between the blocks (6-7) and past the timer read 0xff and ignore writes (counted). The timer
// is read-only.
//
// Threads: read()/write() on vCPU threads, the overflow timer on the loop thread, wake() and
// the report on the loop thread; mu_ guards the registers. Lock order: mu_ -> TimerList mutex;
// the SCI line is driven with mu_ held; the callbacks run without it (on the writing vCPU).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string_view>

#include "devices/bus/device_state.h"
#include "devices/bus/irq_line.h"
#include "devices/bus/port_io_device.h"
#include "devices/bus/report_writer.h"
#include "timers/timer.h"
#include "timers/timer_list.h"

namespace minivmm::devices {

struct AcpiPmStats {
  std::uint64_t timer_reads = 0;      // PM_TMR reads (any width)
  std::uint64_t timer_overflows = 0;  // bit-23 flips that set TMR_STS, found or timed
  std::uint64_t sci_raised = 0;       // SCI low -> high
  std::uint64_t suspends = 0;         // SLP_EN with S3
  std::uint64_t power_offs = 0;       // SLP_EN with S5
  std::uint64_t wakes = 0;            // wake() calls (WAK_STS set)
  std::uint64_t unknown_sleeps = 0;   // SLP_EN with a type the DSDT does not offer
  std::uint64_t bad_accesses = 0;     // bytes outside the registers, writes to the timer
};

class AcpiPm final : public PortIoDevice, public ReportingDevice, public StatefulDevice {
 public:
  // QEMU's layout at PM_IO_BASE (hw/acpi/core.c: "acpi-evt" 4 bytes, "acpi-cnt" 2, "acpi-tmr" 4).
  static constexpr std::uint16_t kPm1EvtOffset = 0;
  static constexpr std::uint16_t kPm1EvtLen = 4;
  static constexpr std::uint16_t kPm1CntOffset = 4;
  static constexpr std::uint16_t kPm1CntLen = 2;
  static constexpr std::uint16_t kPmTmrOffset = 8;
  static constexpr std::uint16_t kPmTmrLen = 4;
  static constexpr std::uint16_t kPortCount = 12;
  static constexpr unsigned kSciGsi = 9;
  static constexpr std::uint64_t kTimerHz = 3'579'545;
  // TMR_STS rises each time bit 23 of the 24-bit count changes: every 2^23 ticks.
  static constexpr std::uint64_t kFlipTicks = 1ull << 23;

  // PM1_STS / PM1_EN bits (ACPI 6.5 tables 4.16, 4.17).
  static constexpr std::uint16_t kTmrSts = 1u << 0;
  static constexpr std::uint16_t kBmSts = 1u << 4;
  static constexpr std::uint16_t kGblSts = 1u << 5;
  static constexpr std::uint16_t kPwrBtnSts = 1u << 8;
  static constexpr std::uint16_t kSlpBtnSts = 1u << 9;
  static constexpr std::uint16_t kRtcSts = 1u << 10;
  static constexpr std::uint16_t kWakSts = 1u << 15;
  static constexpr std::uint16_t kTmrEn = kTmrSts, kGblEn = kGblSts, kPwrBtnEn = kPwrBtnSts,
                                 kRtcEn = kRtcSts;
  // QEMU keeps what the guest writes in PM1_EN, but only these raise the SCI.
  static constexpr std::uint16_t kSciCauses = kTmrSts | kGblSts | kPwrBtnSts | kRtcSts;
  // PM1_CNT bits (table 4.18).
  static constexpr std::uint16_t kSciEn = 1u << 0;
  static constexpr std::uint16_t kSlpTypShift = 10;
  static constexpr std::uint16_t kSlpTypMask = 7u << kSlpTypShift;
  static constexpr std::uint16_t kSlpEn = 1u << 13;
  static constexpr std::uint16_t kGblRls = 1u << 2;  // write-only: reads 0
  // The DSDT's _S3 and _S5 SLP_TYP values (QEMU's piix4: S3 = 1, S5 = 0).
  static constexpr std::uint8_t kSlpTypS3 = 1;
  static constexpr std::uint8_t kSlpTypS5 = 0;

  enum class WakeReason { kOther, kRtc };

  struct Callbacks {
    std::function<void()> on_power_off;  // S5
    std::function<void()> on_suspend;    // S3
  };

  // `vm_timers` (vm_clock) and `sci` must outlive the device.
  AcpiPm(timers::TimerList& vm_timers, IrqLine& sci, Callbacks callbacks);
  AcpiPm(const AcpiPm&) = delete;
  AcpiPm& operator=(const AcpiPm&) = delete;

  std::string_view name() const noexcept override { return report_key(); }
  void read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept override;
  void write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept override;

  // The machine resumed the guest from S3: WAK_STS (and RTC_STS for an RTC alarm) rise.
  void wake(WakeReason reason) noexcept;
  // Whether PM1_EN lets an RTC alarm wake the guest (RTC_EN), as QEMU's wakeup reasons.
  bool rtc_wake_enabled() const;

  // Ticks since vm_clock's zero at vm_clock time `vm`, and the 24-bit count the guest reads.
  static std::uint64_t ticks_at(timers::Nanos vm) noexcept;
  static std::uint32_t count_at(timers::Nanos vm) noexcept;

  AcpiPmStats stats() const;

  // ReportingDevice: stats() under "acpi_pm".
  std::string_view report_key() const noexcept override { return "acpi_pm"; }
  void report(ReportWriter& out) const override;
  // StatefulDevice (acpi_pm_state.cc): the registers, the next flip and the counters; the
  // count itself is vm_clock's.
  std::string_view state_key() const noexcept override { return report_key(); }
  void save_state(StateWriter& out) const override;
  void load_state(StateReader& in) override;

 private:
  using Nanos = timers::Nanos;

  std::uint8_t read_byte(std::uint16_t offset, Nanos now) noexcept;
  // Sets TMR_STS if the count passed a flip since the last look; re-arms for the next one.
  void scan_overflow(Nanos now) noexcept;
  // Arms the overflow timer exactly while TMR_EN asks for the interrupt.
  void program_timer() noexcept;
  void update_sci() noexcept;
  // Applies a PM1_CNT write (merged value); returns the sleep type asked for, or -1.
  int write_cnt(std::uint16_t value) noexcept;
  void on_timer(const timers::Timer::Expiry& expiry);

  timers::TimerList& vm_timers_;
  IrqLine& sci_;
  const Callbacks callbacks_;

  mutable std::mutex mu_;  // lock order: mu_ -> TimerList mutex
  std::uint16_t sts_ = 0;
  std::uint16_t en_ = 0;
  std::uint16_t cnt_ = kSciEn;  // SLP_TYP and SCI_EN (SLP_EN and GBL_RLS are not stored)
  std::uint64_t next_flip_ = 1ull << 23;  // the tick count at which bit 23 next flips
  bool sci_level_ = false;
  AcpiPmStats stats_;
  timers::Timer timer_;  // last: destroyed (cancelled) first
};

}  // namespace minivmm::devices
