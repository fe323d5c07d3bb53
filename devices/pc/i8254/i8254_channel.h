// One counter of the Intel 8254 Programmable Interval Timer (data sheet "8254 PROGRAMMABLE
// INTERVAL TIMER", Intel order number 231164): the count register, the counting element, the
// output latch, the status latch and the read/write flip-flops, for all six modes, binary and
// BCD.
//
// The counter never ticks. It remembers when its current run started and derives the counting
// element (CE) and OUT from the time elapsed since then at 1.193182 MHz (QEMU hw/timer/i8254.c,
// crosvm pit.rs), so reading it costs one clock read and a few divisions whatever the rate.
// Times are the caller's clock (the PIT passes vm_clock, which stands still while the VM is
// paused); the class reads no clock itself and is a plain value type.
//
// Deviations from the data sheet, none visible to a guest that follows the programming rules:
// - A count is loaded into the CE when it is written, not on the following CLK pulse (the
//   one-tick load delay is not modelled; QEMU does the same).
// - In modes 2 and 3 the cycle length is rounded to whole nanoseconds and the count is derived
//   from the phase within that cycle, so the counter and the periodic IRQ timer (which runs on a
//   nanosecond grid) can never drift apart. The cost is a frequency error below 0.5 ns per
//   cycle (< 1 ppm at 1 kHz), far inside the 8254 crystal's own tolerance.
// - Mode 3: a count rewritten while counting takes effect at the end of the current full cycle
//   (next rising edge of OUT); the data sheet says the end of the current half-cycle.
// - BCD counts with digits above 9 are taken at their nibble values (the chip's behaviour for
//   them is undefined).
//
// Threads: none of its own; the owner (I8254Pit) serialises every call under its mutex.
#pragma once

#include <cstdint>
#include <optional>

#include "devices/bus/device_state.h"
#include "timers/clock.h"

namespace minivmm::devices {

// The counter clock on a PC: the 14.31818 MHz system crystal divided by 12.
inline constexpr std::uint64_t kPitFrequencyHz = 1'193'182;

// Control word fields (data sheet "Control Word Format"): SC1 SC0 | RW1 RW0 | M2 M1 M0 | BCD.
inline constexpr unsigned kPitControlSelectShift = 6;
inline constexpr std::uint8_t kPitSelectReadBack = 3;  // SC = 11: read-back command
inline constexpr unsigned kPitControlAccessShift = 4;
inline constexpr std::uint8_t kPitAccessLatch = 0;  // RW = 00: counter latch command
inline constexpr std::uint8_t kPitAccessLsb = 1;
inline constexpr std::uint8_t kPitAccessMsb = 2;
inline constexpr std::uint8_t kPitAccessWord = 3;  // LSB first, then MSB
inline constexpr unsigned kPitControlModeShift = 1;
inline constexpr std::uint8_t kPitControlBcd = 0x01;

// Read-back command (data sheet "Read-Back Command"): bits 5 and 4 are active low.
inline constexpr std::uint8_t kPitReadBackNoCount = 0x20;
inline constexpr std::uint8_t kPitReadBackNoStatus = 0x10;
inline constexpr std::uint8_t kPitReadBackCounter0 = 0x02;  // counter n is bit n + 1

// Status byte (data sheet "Status Byte"): OUTPUT | NULL COUNT | RW1 RW0 | M2 M1 M0 | BCD.
inline constexpr std::uint8_t kPitStatusOutput = 0x80;
inline constexpr std::uint8_t kPitStatusNullCount = 0x40;

// Modes (M2 M1 M0; 6 and 7 are aliases of 2 and 3, M2 being "don't care" there).
inline constexpr int kPitModeInterruptOnTerminalCount = 0;
inline constexpr int kPitModeHardwareRetriggerableOneShot = 1;
inline constexpr int kPitModeRateGenerator = 2;
inline constexpr int kPitModeSquareWave = 3;
inline constexpr int kPitModeSoftwareTriggeredStrobe = 4;
inline constexpr int kPitModeHardwareTriggeredStrobe = 5;

// Whole counter clock periods (ticks) in `elapsed` (clamped to >= 0), rounded down. Seconds and
// the sub-second rest are scaled separately, so there is no overflow for any int64 nanosecond
// count (292 years) without 128-bit arithmetic.
std::uint64_t pit_ticks_in(timers::Nanos elapsed) noexcept;

// The shortest time that holds `ticks` whole ticks: pit_ticks_in(pit_ticks_duration(n)) == n
// and one nanosecond less holds n - 1. Valid for n below 2^50 (about 30 years of ticks).
timers::Nanos pit_ticks_duration(std::uint64_t ticks) noexcept;

// The cycle length of a mode 2 or 3 count (1..65536), rounded to the nearest nanosecond.
timers::Nanos pit_cycle_duration(std::uint32_t count) noexcept;

class I8254Channel {
 public:
  // What a byte written to the counter's port did.
  enum class WriteResult {
    kPartial,  // the first byte of a two-byte count, nothing changed yet
    kStopped,  // mode 0: the first byte of a two-byte count stopped counting, OUT went low
    kCount,    // a complete count was written
  };

  // Rising edges of OUT from a point in time on: `first`, then every `period` (0: only one).
  struct RisingEdges {
    timers::Nanos first;
    timers::Nanos period;
  };

  // `gate`: the GATE input's level at power-on. The counter starts unprogrammed (mode 3, word
  // access, binary, NULL COUNT, not counting): the 8254's power-on state is undefined and there
  // is no BIOS here to program it, so nothing counts until the guest writes a count.
  explicit I8254Channel(bool gate) noexcept;

  // A control word with RW != 00 for this counter: new mode, access and BCD flag. Stops the
  // counter until a count is written (NULL COUNT set), resets both flip-flops and both latches.
  void write_control(std::uint8_t control_word, timers::Nanos now) noexcept;

  // Counter latch command (RW = 00) or the count half of a read-back. Ignored while a latched
  // count is still unread, as on the chip ("only the first latch command is honoured").
  void latch_count(timers::Nanos now) noexcept;
  // The status half of a read-back; likewise ignored while a latched status is unread.
  void latch_status(timers::Nanos now) noexcept;

  // One byte written to the counter's port (0x40 + n).
  WriteResult write(std::uint8_t value, timers::Nanos now) noexcept;
  // One byte read from the counter's port: latched status, else latched count, else the live
  // CE, each in the order the access mode prescribes.
  std::uint8_t read(timers::Nanos now) noexcept;

  // The GATE input. Returns true when the level change restarted, triggered or suspended
  // counting (the output schedule changed).
  bool set_gate(bool level, timers::Nanos now) noexcept;
  bool gate() const noexcept { return gate_; }

  // The OUT pin at `now`.
  bool out(timers::Nanos now) noexcept;

  // The next rising edges of OUT strictly after `now`, or nullopt when OUT will not rise again
  // without a new write or gate change. Modes 2 and 3 give a periodic schedule.
  std::optional<RisingEdges> next_rising_edges(timers::Nanos now) noexcept;

  // Applies a reload that was due at or before `now` (modes 2/3: a count written while
  // counting). Every public operation calls it; the PIT's timer callback calls it too.
  void settle(timers::Nanos now) noexcept;

  // The effective mode, 0..5.
  int mode() const noexcept { return mode_; }

  // Every field, for the PIT's snapshot record (i8254_state.cc). load_state() checks each
  // against what the chip's logic can produce at `now` (vm_clock, set back to the snapshot's
  // instant): modes 0..5, counts within the modulus, flags only in the modes that use them,
  // times no later than now. Throws StateError; the channel is then unchanged.
  void save_state(StateWriter& out) const;
  void load_state(StateReader& in, timers::Nanos now);

 private:
  std::uint32_t modulus() const noexcept { return bcd_ ? 10'000u : 0x10000u; }
  std::uint64_t ticks_elapsed(timers::Nanos now) const noexcept;
  std::uint64_t phase_ticks(timers::Nanos now) const noexcept;
  // The CE as a number in [0, modulus()) (65536 reads as 0, 10000 as 0 in BCD).
  std::uint32_t counting_element(timers::Nanos now) const noexcept;
  std::uint16_t encode(std::uint32_t value) const noexcept;
  std::uint32_t decode(std::uint16_t raw) const noexcept;
  std::uint8_t status(timers::Nanos now) noexcept;
  WriteResult load_count(std::uint16_t raw, timers::Nanos now) noexcept;
  void start_run(timers::Nanos now) noexcept;
  std::optional<RisingEdges> edge_after_ticks(std::uint64_t ticks,
                                              timers::Nanos now) const noexcept;

  // Programming.
  std::uint8_t access_ = kPitAccessWord;
  std::uint8_t mode_bits_ = kPitModeSquareWave;  // M2..M0 as written, for the status byte
  int mode_ = kPitModeSquareWave;
  bool bcd_ = false;
  bool gate_;

  // Flip-flops and latches.
  bool write_msb_next_ = false;
  std::uint8_t write_lsb_ = 0;
  bool read_msb_next_ = false;
  std::optional<std::uint16_t> latched_count_;
  bool latched_msb_next_ = false;
  std::optional<std::uint8_t> latched_status_;

  // Counting. cr_ is the count register (1..65536, or 1..10000 in BCD); n_ is the count the
  // current run started from (what the CE reloads with in modes 2/3).
  std::uint32_t cr_ = 0x10000;
  std::uint32_t n_ = 0x10000;
  bool armed_ = false;      // a complete count was written since the control word
  bool loaded_ = false;     // the CE holds a count (modes 1/5: only once triggered)
  bool running_ = false;    // the CE is counting now (gate, trigger and writes permitting)
  bool triggered_ = false;  // modes 1/5: a gate rising edge started the one-shot
  bool writing_ = false;    // mode 0: first byte of a two-byte count written, counting stopped
  bool null_count_ = true;
  timers::Nanos run_start_{0};
  std::uint64_t ticks_base_ = 0;  // modes 0/1/4/5: ticks counted before the last suspension
  std::uint32_t frozen_ce_ = 0;   // the CE while it holds still (stopped, untriggered, gated)
  bool reload_pending_ = false;   // modes 2/3: cr_ loads at reload_at_ (end of the cycle)
  timers::Nanos reload_at_{0};
};

}  // namespace minivmm::devices
