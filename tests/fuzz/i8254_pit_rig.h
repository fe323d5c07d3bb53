// The PIT with port 0x61 on the same chip, as a PC wires them.
//
// Config byte bit 0: LostTickPolicy::kDiscard (else kDelay).
// Host op: the value is the pattern of IRQ0 pulse_checked() rejections (a PIC that still has
// IRQ0 pending), consumed one bit per checked pulse, repeating.
//
// Checks: IRQ0 is only ever pulsed from the PIT's timer callbacks, never from a port access, and
// never left held; every pulse is counted in stats() (ticks_injected, ticks_coalesced); the kDelay
// backlog stays within kMaxOwedTicks; kDiscard never owes or retries; port 0x61 reads back the
// written bits 0-3 and never sets the NMI bits 6-7.
#pragma once

#include <array>

#include "devices/pc/i8254/i8254_pit.h"
#include "devices/pc/i8254/i8254_speaker_port.h"
#include "tests/fuzz/fuzz_target.h"

namespace minivmm::fuzz {

class I8254PitRig final : public Rig {
 public:
  static constexpr std::uint8_t kConfigDiscard = 0x01;
  static constexpr std::size_t kPitSlot = 0;
  static constexpr std::size_t kSpeakerSlot = 1;

  I8254PitRig(Env& env, std::uint8_t config)
      : env_(env),
        policy_((config & kConfigDiscard) != 0 ? devices::LostTickPolicy::kDiscard
                                               : devices::LostTickPolicy::kDelay),
        pit_(env.vm_timers(), irq0_, policy_) {
    // The IRQ0 timer's period floor, and the owed-tick retry timer's 25 us floor
    // (TickDelivery::kMinRetryDelay).
    env.add_timer_rate(1e9 / static_cast<double>(devices::I8254Pit::kMinIrqPeriod.count()));
    env.add_timer_rate(1e9 / 25'000.0);
  }

  std::span<const Slot> slots() const noexcept override { return slots_; }

  void after_read(std::size_t slot, std::uint16_t offset,
                  std::span<const std::uint8_t> data) override {
    after_access();
    if (slot != kSpeakerSlot || offset != 0) return;
    // NMI_SC: bits 0-3 as written, 4 and 5 computed, 6 and 7 (NMI sources) always 0.
    FUZZ_CHECK((data[0] & 0x0f) == port61_, "port 0x61 read 0x%02x after writing 0x%02x", data[0],
               port61_);
    FUZZ_CHECK((data[0] & 0xc0) == 0, "port 0x61 reports an NMI source: 0x%02x", data[0]);
  }

  void after_write(std::size_t slot, std::uint16_t offset,
                   std::span<const std::uint8_t> data) override {
    after_access();
    if (slot == kSpeakerSlot && offset == 0) port61_ = data[0] & 0x0f;
  }

  void host_op(const Op& op) override { irq0_.set_reject_mask(op.value); }

  void check() override {
    irq0_.check_idle();
    const devices::I8254Pit::Stats s = pit_.stats();
    FUZZ_CHECK(s.ticks_owed <= devices::I8254Pit::kMaxOwedTicks, "PIT owes %llu ticks (cap %llu)",
               static_cast<unsigned long long>(s.ticks_owed),
               static_cast<unsigned long long>(devices::I8254Pit::kMaxOwedTicks));
    FUZZ_CHECK(s.ticks_injected == irq0_.pulses() + irq0_.accepted(),
               "PIT ticks_injected %llu, IRQ0 saw %llu pulses + %llu accepted checked pulses",
               static_cast<unsigned long long>(s.ticks_injected),
               static_cast<unsigned long long>(irq0_.pulses()),
               static_cast<unsigned long long>(irq0_.accepted()));
    FUZZ_CHECK(s.ticks_coalesced == irq0_.rejected(),
               "PIT ticks_coalesced %llu, IRQ0 rejected %llu",
               static_cast<unsigned long long>(s.ticks_coalesced),
               static_cast<unsigned long long>(irq0_.rejected()));
    FUZZ_CHECK(s.ticks_injected_by_pit == s.ticks_injected,
               "no pulse train, yet the PIT sent %llu of %llu ticks",
               static_cast<unsigned long long>(s.ticks_injected_by_pit),
               static_cast<unsigned long long>(s.ticks_injected));
    if (policy_ == devices::LostTickPolicy::kDiscard) {
      FUZZ_CHECK(s.ticks_owed == 0 && irq0_.accepted() + irq0_.rejected() == 0,
                 "kDiscard owes %llu ticks / used pulse_checked",
                 static_cast<unsigned long long>(s.ticks_owed));
    }
  }

  std::uint64_t digest() const override {
    const devices::I8254Pit::Stats s = pit_.stats();
    return irq0_.rises() * 31 + irq0_.rejected() * 17 + s.ticks_lost * 7 + s.ticks_late * 3 +
           s.timer_arms;
  }

 private:
  void after_access() const noexcept { irq0_.check_idle(); }

  Env& env_;
  const devices::LostTickPolicy policy_;
  // IRQ0 edges come from the PIT's timer only: a port access never pulses it.
  CheckedIrqLine irq0_{env_, "PIT IRQ0", CheckedIrqLine::Kind::kEdge, bits(Phase::kTimers)};
  devices::I8254Pit pit_;
  devices::I8254SpeakerPort speaker_{pit_};
  std::uint8_t port61_ = 0;
  const std::array<Slot, 2> slots_ = {
      // Where the PC board puts them (vmm/machine/pc_board.cc).
      Slot{&pit_, devices::I8254Pit::kPortCount, 0x40}, Slot{&speaker_, 1, 0x61}};
};

}  // namespace minivmm::fuzz
