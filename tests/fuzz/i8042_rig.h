// The i8042 keyboard controller: the device itself (offsets 0-4) and its two one-port views, the
// way the VMM maps it around port 0x61 (0x60 data, 0x64 command).
//
// Checks: every access is counted exactly once (reads + writes + bad_accesses); a wrong width or
// offset reads all ones; the status register never shows INPUT FULL or a parity error; on_reset
// runs once per counted reset request, on the writing access, without the device lock (it reads
// the status register back, which would deadlock otherwise); IRQ1 and IRQ12 change only on guest
// accesses, only when their level changes, and agree with the status register (IRQ1 only with
// keyboard data in the buffer, IRQ12 only with auxiliary data).
#pragma once

#include <algorithm>
#include <array>

#include "devices/pc/i8042.h"
#include "tests/fuzz/fuzz_target.h"

namespace minivmm::fuzz {

class I8042Rig final : public Rig {
 public:
  I8042Rig(Env& env, std::uint8_t /*config*/) : env_(env) {}

  std::span<const Slot> slots() const noexcept override { return slots_; }

  void after_read(std::size_t slot, std::uint16_t offset,
                  std::span<const std::uint8_t> data) override {
    ++accesses_;
    const std::uint16_t at = device_offset(slot, offset);
    if (data.size() != 1 ||
        (at != devices::I8042::kDataOffset && at != devices::I8042::kCommandOffset)) {
      FUZZ_CHECK(std::all_of(data.begin(), data.end(), [](std::uint8_t b) { return b == 0xff; }),
                 "i8042 bad access (offset %u width %zu) did not read all ones", at, data.size());
      return;
    }
    if (at == devices::I8042::kCommandOffset) {
      check_status(data[0]);
      const bool full = (data[0] & devices::I8042::kStatusOutputFull) != 0;
      const bool aux = (data[0] & devices::I8042::kStatusAuxOutputFull) != 0;
      FUZZ_CHECK(!irq1_.level() || (full && !aux), "i8042 IRQ1 high with status 0x%02x", data[0]);
      FUZZ_CHECK(!irq12_.level() || (full && aux), "i8042 IRQ12 high with status 0x%02x",
                 data[0]);
    }
  }

  void after_write(std::size_t /*slot*/, std::uint16_t /*offset*/,
                   std::span<const std::uint8_t> /*data*/) override {
    ++accesses_;
  }

  void check() override {
    const devices::I8042::Stats s = kbd_.stats();
    FUZZ_CHECK(s.reads + s.writes + s.bad_accesses == accesses_ + reset_reads_,
               "i8042 counted %llu accesses, %llu were made",
               static_cast<unsigned long long>(s.reads + s.writes + s.bad_accesses),
               static_cast<unsigned long long>(accesses_ + reset_reads_));
    FUZZ_CHECK(s.reset_requests == resets_, "i8042 counted %llu resets, on_reset ran %llu times",
               static_cast<unsigned long long>(s.reset_requests),
               static_cast<unsigned long long>(resets_));
  }

  std::uint64_t digest() const override {
    const devices::I8042::Stats s = kbd_.stats();
    return resets_ * 31 + s.unknown_commands * 17 + s.device_bytes_dropped * 7 +
           s.keyboard_unknown * 5 + s.keyboard_overruns * 3 + s.bad_accesses;
  }

 private:
  static constexpr std::size_t kDeviceSlot = 0;
  static constexpr std::size_t kDataSlot = 1;

  static std::uint16_t device_offset(std::size_t slot, std::uint16_t offset) noexcept {
    if (slot == kDeviceSlot) return offset;
    const std::uint16_t base =
        slot == kDataSlot ? devices::I8042::kDataOffset : devices::I8042::kCommandOffset;
    return static_cast<std::uint16_t>(base + offset);
  }

  static void check_status(std::uint8_t status) {
    FUZZ_CHECK((status & devices::I8042::kStatusInputFull) == 0,
               "i8042 status 0x%02x: input buffer full (input is taken at once)", status);
    FUZZ_CHECK((status & devices::I8042::kStatusParityError) == 0,
               "i8042 status 0x%02x: parity error", status);
  }

  void on_reset() {
    FUZZ_CHECK(env_.phase() == Phase::kGuestAccess, "i8042 on_reset during %s",
               phase_name(env_.phase()));
    ++resets_;
    // Documented: on_reset runs after the device lock is released, so it may call back in.
    std::array<std::uint8_t, 1> status{};
    kbd_.read(devices::I8042::kCommandOffset, status);
    ++reset_reads_;
    check_status(status[0]);
  }

  Env& env_;
  CheckedIrqLine irq1_{env_, "i8042 IRQ1", CheckedIrqLine::Kind::kLevel, bits(Phase::kGuestAccess)};
  CheckedIrqLine irq12_{env_, "i8042 IRQ12", CheckedIrqLine::Kind::kLevel,
                        bits(Phase::kGuestAccess)};
  devices::I8042 kbd_{[this] { on_reset(); }, &irq1_, &irq12_};
  std::uint64_t accesses_ = 0;
  std::uint64_t reset_reads_ = 0;
  std::uint64_t resets_ = 0;
  const std::array<Slot, 3> slots_ = {Slot{&kbd_, devices::I8042::kPortCount, std::nullopt},
                                      // Where the PC board puts them (vmm/machine/pc_board.cc).
                                      Slot{&kbd_.data_port(), 1, 0x60},
                                      Slot{&kbd_.command_port(), 1, 0x64}};
};

}  // namespace minivmm::fuzz
