// The ACPI PM block (devices/pc/acpi_pm.h) at its PC place, 0x600-0x60b, with its SCI on a
// recording line and the S3/S5 callbacks counted. Host ops (OpKind::kHost) are the machine's
// wake(): arg bit 0 picks the RTC alarm as the reason.
//
// Checks, after every access: a PM_TMR read gives the 24-bit count at the vm_clock time of the
// read (its top byte 0) and is counted once; the holes (6-7, past 11) read 0xff; PM1_CNT reads
// SCI_EN and never SLP_EN; each SLP_EN write with S3 or S5 runs its callback exactly once, on the
// writing access, and nothing else does; the SCI line's rising edges are the device's
// sci_raised, and its level is that of the enabled causes (read back through the device after
// the access, which the next access would do anyway).
#pragma once

#include <array>
#include <cstdint>

#include "devices/pc/acpi_pm.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/support/fake_irq_line.h"

namespace minivmm::fuzz {

class AcpiPmRig final : public Rig {
 public:
  AcpiPmRig(Env& env, std::uint8_t /*config*/) : env_(env) {
    // The overflow timer: one expiry per bit-23 flip, 2.34 s apart.
    env.add_timer_rate(1.0);
  }

  std::span<const Slot> slots() const noexcept override { return slots_; }

  void before_access(std::size_t /*slot*/, std::uint16_t /*offset*/) override {
    suspends_before_ = suspends_;
    power_offs_before_ = power_offs_;
    timer_reads_before_ = pm_.stats().timer_reads;
  }

  void after_read(std::size_t /*slot*/, std::uint16_t offset,
                  std::span<const std::uint8_t> data) override {
    const std::uint32_t count = devices::AcpiPm::count_at(env_.vm().now());
    bool timer = false;
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::uint32_t o = offset + static_cast<std::uint32_t>(i);
      if (o >= 8 && o < 12) {
        timer = true;
        FUZZ_CHECK(data[i] == static_cast<std::uint8_t>(count >> (8 * (o - 8))),
                   "PM_TMR byte %u read 0x%02x, the count is 0x%06x", o - 8, data[i], count);
      } else if (o == 6 || o == 7 || o >= 12) {
        FUZZ_CHECK(data[i] == 0xff, "hole at offset %u read 0x%02x", o, data[i]);
      } else if (o == 4) {
        FUZZ_CHECK((data[i] & 0x01) != 0, "PM1_CNT read without SCI_EN");
      } else if (o == 5) {
        FUZZ_CHECK((data[i] & 0x20) == 0, "PM1_CNT read with SLP_EN");
      }
    }
    const std::uint64_t reads = pm_.stats().timer_reads;
    FUZZ_CHECK(reads == timer_reads_before_ + (timer ? 1 : 0),
               "timer_reads went from %llu to %llu", static_cast<unsigned long long>(timer_reads_before_),
               static_cast<unsigned long long>(reads));
    check_callbacks(0, 0);
  }

  void after_write(std::size_t /*slot*/, std::uint16_t offset,
                   std::span<const std::uint8_t> data) override {
    // The sleep a write asks for: SLP_EN in the merged PM1_CNT (the type from the low byte the
    // write carries, else the one the register held before).
    bool slp_en = false;
    int type = static_cast<int>((cnt_before_ >> 10) & 7);
    for (std::size_t i = 0; i < data.size(); ++i) {
      const std::uint32_t o = offset + static_cast<std::uint32_t>(i);
      if (o == 5) {
        slp_en = (data[i] & 0x20) != 0;
        type = (data[i] >> 2) & 7;
      }
    }
    const int s5 = slp_en && type == devices::AcpiPm::kSlpTypS5 ? 1 : 0;
    const int s3 = slp_en && type == devices::AcpiPm::kSlpTypS3 ? 1 : 0;
    check_callbacks(s3, s5);
  }

  void host_op(const Op& op) override {
    pm_.wake((op.arg & 1) != 0 ? devices::AcpiPm::WakeReason::kRtc
                               : devices::AcpiPm::WakeReason::kOther);
  }

  void check() override {
    const devices::AcpiPmStats s = pm_.stats();
    FUZZ_CHECK(static_cast<std::uint64_t>(sci_.rising_edges()) == s.sci_raised,
               "SCI rose %d times, the device says %llu", sci_.rising_edges(),
               static_cast<unsigned long long>(s.sci_raised));
    FUZZ_CHECK(s.suspends == static_cast<std::uint64_t>(suspends_) &&
                   s.power_offs == static_cast<std::uint64_t>(power_offs_),
               "callbacks and counters disagree");
    // The register view the next access sees (reading it costs nothing the access would not).
    std::array<std::uint8_t, 6> regs{};
    {
      Env::PhaseScope scope(env_, Phase::kGuestAccess);
      pm_.read(0, regs);
    }
    const auto sts = static_cast<std::uint16_t>(regs[0] | regs[1] << 8);
    const auto en = static_cast<std::uint16_t>(regs[2] | regs[3] << 8);
    cnt_before_ = static_cast<std::uint16_t>(regs[4] | regs[5] << 8);
    FUZZ_CHECK(sci_.level() == ((sts & en & devices::AcpiPm::kSciCauses) != 0),
               "SCI level %d with PM1_STS 0x%04x and PM1_EN 0x%04x", sci_.level(), sts, en);
  }

  std::uint64_t digest() const override {
    const devices::AcpiPmStats s = pm_.stats();
    return s.timer_reads * 31 + s.sci_raised * 17 + s.suspends * 13 + s.power_offs * 11 +
           s.wakes * 7 + s.unknown_sleeps * 5 + s.bad_accesses * 3 + (sci_.level() ? 1 : 0);
  }

 private:
  void check_callbacks(int s3, int s5) {
    FUZZ_CHECK(suspends_ == suspends_before_ + s3, "S3 callbacks: %d, expected %d",
               suspends_ - suspends_before_, s3);
    FUZZ_CHECK(power_offs_ == power_offs_before_ + s5, "S5 callbacks: %d, expected %d",
               power_offs_ - power_offs_before_, s5);
  }
  void on_sleep(int& count) {
    FUZZ_CHECK(env_.phase() == Phase::kGuestAccess, "a sleep callback during %s",
               phase_name(env_.phase()));
    ++count;
  }

  Env& env_;
  testing::FakeIrqLine sci_;
  int suspends_ = 0;
  int power_offs_ = 0;
  int suspends_before_ = 0;
  int power_offs_before_ = 0;
  std::uint64_t timer_reads_before_ = 0;
  std::uint16_t cnt_before_ = devices::AcpiPm::kSciEn;
  devices::AcpiPm pm_{env_.vm_timers(), sci_,
                      devices::AcpiPm::Callbacks{[this] { on_sleep(power_offs_); },
                                                 [this] { on_sleep(suspends_); }}};
  const std::array<Slot, 1> slots_ = {
      // Where the PC board puts it (vmm/machine/pc_board.cc).
      Slot{&pm_, devices::AcpiPm::kPortCount, 0x600}};
};

}  // namespace minivmm::fuzz
