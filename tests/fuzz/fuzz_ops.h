// The fuzzers' input format, shared by every target and by the seed-corpus generator.
//
// An input is one config byte followed by fixed-size 8-byte records; a trailing partial record is
// ignored. Fixed-size records keep libFuzzer's byte mutations meaningful: flipping a byte changes
// one field of one operation instead of re-framing everything after it.
//
//   byte 0     kind   % kOpKindCount (read, write, advance, advance-late, host call, pause/resume)
//   byte 1     arg    read/write: width 1 << (arg % 3); advance: unit (ns, us, ms, s) = arg % 4;
//                     host call: target-specific (the UART takes arg % 5 bytes)
//   bytes 2-3  port   little-endian; a device target uses port % (its port count), the bus target
//                     the whole 0..0xffff
//   bytes 4-7  value  little-endian; written value (low `width` bytes), or the advance amount in
//                     the unit above, or the host call's argument
//
// The config byte selects construction options (lost-tick policy, UART batching, RTC epoch...),
// so that every option is fuzzed without making the records longer.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "timers/clock.h"

namespace minivmm::fuzz {

using timers::Nanos;

enum class OpKind : std::uint8_t {
  kRead,
  kWrite,
  kAdvance,      // time passes deadline by deadline, every timer on time (the time driver)
  kAdvanceLate,  // the clock jumps and the loop then catches up: a descheduled VMM thread
  kHost,         // a call from the VMM side: UART input, PIC coalescing, wall clock step...
  kPauseResume,  // toggles vm_clock between paused and running
};
inline constexpr std::uint8_t kOpKindCount = 6;
inline constexpr std::size_t kOpSize = 8;

// Longest time one advance may cover: long enough to cross any device period (the PIT's longest,
// 55 ms; the RTC's once-a-second update), short enough that a single record cannot spend the
// whole input's time budget.
inline constexpr Nanos kMaxAdvance = std::chrono::seconds{10};

enum class TimeUnit : std::uint8_t { kNs, kUs, kMs, kS };
inline constexpr std::uint8_t kTimeUnitCount = 4;

struct Op {
  OpKind kind = OpKind::kRead;
  std::uint8_t arg = 0;
  std::uint16_t port = 0;
  std::uint32_t value = 0;

  std::size_t width() const noexcept { return std::size_t{1} << (arg % 3); }

  // The advance amount, clamped to kMaxAdvance.
  Nanos delta() const noexcept {
    static constexpr std::array<std::int64_t, kTimeUnitCount> kUnitNs = {1, 1'000, 1'000'000,
                                                                         1'000'000'000};
    const std::int64_t ns = std::int64_t{value} * kUnitNs[arg % kTimeUnitCount];
    return std::min(Nanos{ns}, kMaxAdvance);  // u32 * 1e9 < 2^63: no overflow
  }

  // The low width() bytes of `value`, as the guest puts them on the bus (x86 is little-endian).
  std::array<std::uint8_t, 4> value_bytes() const noexcept {
    return {static_cast<std::uint8_t>(value), static_cast<std::uint8_t>(value >> 8),
            static_cast<std::uint8_t>(value >> 16), static_cast<std::uint8_t>(value >> 24)};
  }
};

class OpReader {
 public:
  OpReader(const std::uint8_t* data, std::size_t size) noexcept
      : bytes_(data, size), pos_(size > 0 ? 1 : 0) {}

  std::uint8_t config() const noexcept { return bytes_.empty() ? 0 : bytes_[0]; }

  std::optional<Op> next() noexcept {
    if (bytes_.size() - pos_ < kOpSize) return std::nullopt;
    const std::uint8_t* r = bytes_.data() + pos_;
    pos_ += kOpSize;
    Op op;
    op.kind = static_cast<OpKind>(r[0] % kOpKindCount);
    op.arg = r[1];
    op.port = static_cast<std::uint16_t>(r[2] | (r[3] << 8));
    op.value = std::uint32_t{r[4]} | (std::uint32_t{r[5]} << 8) | (std::uint32_t{r[6]} << 16) |
               (std::uint32_t{r[7]} << 24);
    return op;
  }

 private:
  std::span<const std::uint8_t> bytes_;
  std::size_t pos_;
};

// Builds inputs in the format above (the seed-corpus generator and reproducers use it).
class OpWriter {
 public:
  explicit OpWriter(std::uint8_t config = 0) { bytes_.push_back(config); }

  OpWriter& read(std::uint16_t port, std::size_t width = 1) {
    return add(OpKind::kRead, width_arg(width), port, 0);
  }
  OpWriter& write(std::uint16_t port, std::uint32_t value, std::size_t width = 1) {
    return add(OpKind::kWrite, width_arg(width), port, value);
  }
  // Picks the coarsest unit that represents `d` exactly.
  OpWriter& advance(Nanos d) { return add_time(OpKind::kAdvance, d); }
  OpWriter& advance_late(Nanos d) { return add_time(OpKind::kAdvanceLate, d); }
  OpWriter& host(std::uint8_t arg, std::uint16_t port, std::uint32_t value) {
    return add(OpKind::kHost, arg, port, value);
  }
  OpWriter& pause_resume() { return add(OpKind::kPauseResume, 0, 0, 0); }
  // Any record as is, for targets that read the fields their own way (virtio_mmio_rig.h).
  OpWriter& raw(OpKind kind, std::uint8_t arg, std::uint16_t port, std::uint32_t value) {
    return add(kind, arg, port, value);
  }

  const std::vector<std::uint8_t>& bytes() const noexcept { return bytes_; }

 private:
  static std::uint8_t width_arg(std::size_t width) { return width == 4 ? 2 : width == 2 ? 1 : 0; }

  OpWriter& add_time(OpKind kind, Nanos d) {
    std::int64_t ns = d.count();
    std::uint8_t unit = 0;
    while (unit < kTimeUnitCount - 1 && ns % 1000 == 0 && ns / 1000 > 0) {
      ns /= 1000;
      ++unit;
    }
    return add(kind, unit, 0, static_cast<std::uint32_t>(ns));
  }

  OpWriter& add(OpKind kind, std::uint8_t arg, std::uint16_t port, std::uint32_t value) {
    const std::array<std::uint8_t, kOpSize> r = {
        static_cast<std::uint8_t>(kind),        arg,
        static_cast<std::uint8_t>(port),        static_cast<std::uint8_t>(port >> 8),
        static_cast<std::uint8_t>(value),       static_cast<std::uint8_t>(value >> 8),
        static_cast<std::uint8_t>(value >> 16), static_cast<std::uint8_t>(value >> 24)};
    bytes_.insert(bytes_.end(), r.begin(), r.end());
    return *this;
  }

  std::vector<std::uint8_t> bytes_;
};

}  // namespace minivmm::fuzz
