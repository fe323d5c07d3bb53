// The two ports test guests and firmware write for the VMM's benefit: isa-debug-exit (0xf4-0xf7)
// and the POST code port (0x80).
//
// Checks: each debug-exit write calls on_exit exactly once, on the writing access, with the odd
// status (value << 1) | 1 of the value at its width (so no guest can exit with 0); reads are 0.
// The POST port keeps the last byte written at offset 0, counts those writes, and reads 0xff.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "devices/pc/debug_exit.h"
#include "devices/pc/post_port.h"
#include "tests/fuzz/fuzz_target.h"

namespace minivmm::fuzz {

class DebugPortsRig final : public Rig {
 public:
  DebugPortsRig(Env& env, std::uint8_t /*config*/) : env_(env) {}

  std::span<const Slot> slots() const noexcept override { return slots_; }

  void before_access(std::size_t /*slot*/, std::uint16_t /*offset*/) override { statuses_.clear(); }

  void after_read(std::size_t slot, std::uint16_t /*offset*/,
                  std::span<const std::uint8_t> data) override {
    const std::uint8_t expected = slot == kDebugExitSlot ? 0x00 : 0xff;
    FUZZ_CHECK(std::all_of(data.begin(), data.end(), [&](std::uint8_t b) { return b == expected; }),
               "%s read is not all 0x%02x", slot == kDebugExitSlot ? "debug-exit" : "POST port",
               expected);
  }

  void after_write(std::size_t slot, std::uint16_t offset,
                   std::span<const std::uint8_t> data) override {
    if (slot == kPostSlot) {
      if (offset == 0) {
        ++post_writes_;
        FUZZ_CHECK(post_.last_code() == data[0], "POST code 0x%02x after writing 0x%02x",
                   post_.last_code(), data[0]);
      }
      FUZZ_CHECK(post_.writes() == post_writes_, "POST port counted %llu writes, %llu made",
                 static_cast<unsigned long long>(post_.writes()),
                 static_cast<unsigned long long>(post_writes_));
      return;
    }
    std::uint32_t value = 0;
    for (std::size_t i = 0; i < data.size(); ++i) value |= std::uint32_t{data[i]} << (8 * i);
    ++exit_writes_;
    FUZZ_CHECK(statuses_.size() == 1, "debug-exit write ran on_exit %zu times", statuses_.size());
    FUZZ_CHECK((statuses_[0] & 1) == 1, "debug-exit status %d is even", statuses_[0]);
    FUZZ_CHECK(statuses_[0] == devices::DebugExit::exit_status(value),
               "debug-exit status %d for value 0x%x", statuses_[0], value);
    FUZZ_CHECK(debug_exit_.exit_requests() == exit_writes_,
               "debug-exit counted %llu requests, %llu writes made",
               static_cast<unsigned long long>(debug_exit_.exit_requests()),
               static_cast<unsigned long long>(exit_writes_));
  }

  std::uint64_t digest() const override {
    return debug_exit_.exit_requests() * 31 + post_.writes() * 7 + post_.last_code();
  }

 private:
  static constexpr std::size_t kDebugExitSlot = 0;
  static constexpr std::size_t kPostSlot = 1;

  void on_exit(int status) {
    FUZZ_CHECK(env_.phase() == Phase::kGuestAccess, "debug-exit on_exit during %s",
               phase_name(env_.phase()));
    statuses_.push_back(status);
  }

  Env& env_;
  devices::DebugExit debug_exit_{[this](int status) { on_exit(status); }};
  devices::PostPort post_;
  std::vector<int> statuses_;  // on_exit calls during the current access
  std::uint64_t exit_writes_ = 0;
  std::uint64_t post_writes_ = 0;
  const std::array<Slot, 2> slots_ = {
      // Where the PC board puts them (vmm/machine/pc_board.cc).
      Slot{&debug_exit_, devices::DebugExit::kPortCount, 0xf4}, Slot{&post_, 1, 0x80}};
};

}  // namespace minivmm::fuzz
