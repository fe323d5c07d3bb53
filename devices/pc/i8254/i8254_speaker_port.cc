#include "devices/pc/i8254/i8254_speaker_port.h"

namespace minivmm::devices {

void I8254SpeakerPort::read(std::uint16_t offset, std::span<std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (offset + i != 0) {
      data[i] = 0xff;
      ++bad_accesses_;
      continue;
    }
    const std::uint64_t ticks = pit_ticks_in(pit_.clock().now());
    const bool toggle = (ticks / kRefreshToggleTicks) % 2 != 0;
    data[i] =
        static_cast<std::uint8_t>((control_ & kNmiScWritable) | (toggle ? kNmiScRefToggle : 0u) |
                                  (pit_.out(2) ? kNmiScTmr2OutSts : 0u));
  }
}

void I8254SpeakerPort::write(std::uint16_t offset, std::span<const std::uint8_t> data) noexcept {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (offset + i != 0) {
      ++bad_accesses_;
      continue;
    }
    control_ = static_cast<std::uint8_t>(data[i] & kNmiScWritable);
    pit_.set_gate(2, (control_ & kNmiScTimCnt2En) != 0);
  }
}

std::uint64_t I8254SpeakerPort::bad_accesses() const {
  std::lock_guard lock(mu_);
  return bad_accesses_;
}

}  // namespace minivmm::devices

namespace minivmm::devices {

void I8254SpeakerPort::save_state(StateWriter& out) const {
  std::lock_guard lock(mu_);
  write_version(out, 1);
  out.u8(control_);
  out.u64(bad_accesses_);
}

void I8254SpeakerPort::load_state(StateReader& in) {
  std::lock_guard lock(mu_);
  read_version(in, 1);
  const std::uint8_t control = in.u8();
  const std::uint64_t bad = in.u64();
  in.expect_end();
  if ((control & ~kNmiScWritable) != 0) in.fail("port 0x61 bits that are read-only");
  control_ = control;
  bad_accesses_ = bad;
}

}  // namespace minivmm::devices
