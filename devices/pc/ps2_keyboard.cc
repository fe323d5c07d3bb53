#include "devices/pc/ps2_keyboard.h"

namespace minivmm::devices {
namespace {

// Scan code sets 1, 2 and 3 as a guest reads them back (0xF0 0x00) through the controller's
// set-2 -> set-1 translation table, which maps the bytes 0x01, 0x02, 0x03 to these.
constexpr std::array<std::uint8_t, 4> kTranslatedSetId = {0x00, 0x43, 0x41, 0x3f};

// The keyboard's commands occupy 0xED-0xFF; a byte there is a command even where a parameter
// was expected.
constexpr std::uint8_t kFirstCommand = 0xed;

}  // namespace

void Ps2Keyboard::receive(std::uint8_t byte, bool translated) noexcept {
  const std::uint8_t pending = pending_;
  pending_ = 0;
  if (pending != 0 && byte < kFirstCommand) {
    parameter(pending, byte, translated);
    return;
  }
  command(byte, translated);
}

void Ps2Keyboard::command(std::uint8_t byte, bool translated) noexcept {
  ++stats_.commands;
  switch (byte) {
    case kCmdEcho:
      send(kCmdEcho);
      return;
    case kCmdSetLeds:
    case kCmdScanCodeSet:
    case kCmdTypematic:
      send(kAck);
      pending_ = byte;
      return;
    case kCmdIdentify:
      send(kAck);
      send(kIdFirst);
      send(translated ? kIdSecondTranslated : kIdSecond);
      return;
    case kCmdEnable:
      // "Clears its output buffer, enables the keyboard and returns an ACK."
      clear_output();
      scanning_ = true;
      send(kAck);
      return;
    case kCmdDisable:
      restore_defaults();
      scanning_ = false;
      send(kAck);
      return;
    case kCmdDefaults:
      restore_defaults();
      scanning_ = true;
      send(kAck);
      return;
    case kCmdResend:
      // The last byte sent, again (the host saw a parity error on it).
      send(last_sent_);
      return;
    case kCmdReset:
      clear_output();
      restore_defaults();
      scanning_ = true;
      send(kAck);
      // The self-test takes hundreds of milliseconds on a real keyboard; with nothing to test,
      // it passes at once.
      send(kSelfTestPassed);
      return;
    default:
      // 0xF7-0xFD set key types for scan code set 3: accepted (no keys, nothing to type).
      if (byte >= 0xf7 && byte <= 0xfd) {
        send(kAck);
        return;
      }
      ++stats_.unknown_commands;
      send(kResend);
      return;
  }
}

void Ps2Keyboard::parameter(std::uint8_t command, std::uint8_t byte, bool translated) noexcept {
  switch (command) {
    case kCmdSetLeds:
      leds_ = byte & 0x07;  // scroll, num, caps lock
      send(kAck);
      return;
    case kCmdTypematic:
      typematic_ = byte & 0x7f;  // bit 7 is reserved, 0
      send(kAck);
      return;
    case kCmdScanCodeSet:
      if (byte == 0) {
        send(kAck);
        send(translated ? kTranslatedSetId[scan_set_] : scan_set_);
      } else if (byte <= 3) {
        scan_set_ = byte;
        send(kAck);
      } else {
        ++stats_.unknown_commands;
        send(kResend);
      }
      return;
    default:
      return;
  }
}

void Ps2Keyboard::restore_defaults() noexcept {
  scan_set_ = 2;
  leds_ = 0;
  typematic_ = kDefaultTypematic;
}

void Ps2Keyboard::send(std::uint8_t byte) noexcept {
  last_sent_ = byte;
  if (count_ == kQueueSize) {
    ++stats_.queue_overruns;
    return;
  }
  queue_[(head_ + count_) % kQueueSize] = byte;
  ++count_;
}

std::uint8_t Ps2Keyboard::pop_output() noexcept {
  if (count_ == 0) return 0;
  const std::uint8_t byte = queue_[head_];
  head_ = (head_ + 1) % kQueueSize;
  --count_;
  return byte;
}

void Ps2Keyboard::clear_output() noexcept {
  head_ = 0;
  count_ = 0;
}

}  // namespace minivmm::devices
