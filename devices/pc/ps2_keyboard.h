// A PS/2 keyboard with no keys being pressed, behind the i8042's keyboard port: it answers the
// host's commands as the IBM PS/2 keyboard does (IBM "Keyboard and Auxiliary Device Controller"
// and "101/102-Key Keyboard" technical references; QEMU hw/input/ps2.c answers the same), so a
// guest's keyboard driver finds a keyboard and never waits for a timeout. No host key input
// reaches it yet: the guest console is the UART.
//
// Commands: 0xED LEDs + byte, 0xEE echo (answers 0xEE, no ACK), 0xF0 scan code set + byte
// (0 reads it back), 0xF2 identify (0xFA 0xAB then 0x41 through the controller's set-2 -> set-1
// translation, 0x83 without), 0xF3 typematic + byte, 0xF4 enable, 0xF5 disable and restore
// defaults, 0xF6 restore defaults, 0xF7-0xFD (set-3 key types) acknowledged, 0xFE resend the last
// byte, 0xFF reset (0xFA then the self-test result 0xAA). Anything else is answered with 0xFE
// ("resend": what a keyboard says to a byte it does not understand) and counted. A command byte
// (0xED or above) that arrives where a parameter is expected starts that command instead, as
// the keyboard's reference describes.
//
// The keyboard's output buffer holds kQueueSize bytes; the controller pulls them one at a time
// into its own one-byte output buffer. A guest that sends commands without reading the answers
// fills it: further answers are dropped and counted (a real keyboard would report an overrun
// with a key code of its own; a keyboard with no keys has nothing else to lose).
//
// Threads: none of its own. Its owner (I8042) calls it under the owner's lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "devices/bus/device_state.h"

namespace minivmm::devices {

class Ps2Keyboard {
 public:
  static constexpr std::size_t kQueueSize = 16;

  // Bytes of the keyboard protocol.
  static constexpr std::uint8_t kCmdSetLeds = 0xed;
  static constexpr std::uint8_t kCmdEcho = 0xee;
  static constexpr std::uint8_t kCmdScanCodeSet = 0xf0;
  static constexpr std::uint8_t kCmdIdentify = 0xf2;
  static constexpr std::uint8_t kCmdTypematic = 0xf3;
  static constexpr std::uint8_t kCmdEnable = 0xf4;
  static constexpr std::uint8_t kCmdDisable = 0xf5;
  static constexpr std::uint8_t kCmdDefaults = 0xf6;
  static constexpr std::uint8_t kCmdResend = 0xfe;
  static constexpr std::uint8_t kCmdReset = 0xff;
  static constexpr std::uint8_t kAck = 0xfa;
  static constexpr std::uint8_t kResend = 0xfe;
  static constexpr std::uint8_t kSelfTestPassed = 0xaa;
  static constexpr std::uint8_t kIdFirst = 0xab;
  static constexpr std::uint8_t kIdSecondTranslated = 0x41;
  static constexpr std::uint8_t kIdSecond = 0x83;
  // 10.9 characters per second after 500 ms: the power-on default.
  static constexpr std::uint8_t kDefaultTypematic = 0x2b;

  struct Stats {
    std::uint64_t commands = 0;          // command bytes taken (not parameters)
    std::uint64_t unknown_commands = 0;  // bytes answered with 0xFE
    std::uint64_t queue_overruns = 0;    // answers dropped because nobody read the earlier ones
  };

  // A byte from the host. `translated`: the controller translates this keyboard's output from
  // set 2 to set 1 (command byte bit 6), which changes what identify and "read scan code set"
  // answer as the guest sees them.
  void receive(std::uint8_t byte, bool translated) noexcept;

  bool has_output() const noexcept { return count_ > 0; }
  // The next byte for the controller; 0 if there is none (callers check has_output()).
  std::uint8_t pop_output() noexcept;

  bool scanning() const noexcept { return scanning_; }
  std::uint8_t scan_code_set() const noexcept { return scan_set_; }
  std::uint8_t leds() const noexcept { return leds_; }
  std::uint8_t typematic() const noexcept { return typematic_; }
  const Stats& stats() const noexcept { return stats_; }

  // Part of the controller's snapshot record (i8042_state.cc), which calls these under its lock.
  void save_state(StateWriter& out) const;
  void load_state(StateReader& in);

 private:
  void command(std::uint8_t byte, bool translated) noexcept;
  void parameter(std::uint8_t command, std::uint8_t byte, bool translated) noexcept;
  void restore_defaults() noexcept;
  void send(std::uint8_t byte) noexcept;
  void clear_output() noexcept;

  std::array<std::uint8_t, kQueueSize> queue_{};
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  std::uint8_t last_sent_ = kAck;  // what 0xFE resends

  std::uint8_t pending_ = 0;  // a command waiting for its parameter byte; 0 = none
  bool scanning_ = true;
  std::uint8_t scan_set_ = 2;
  std::uint8_t leds_ = 0;
  std::uint8_t typematic_ = kDefaultTypematic;
  Stats stats_;
};

}  // namespace minivmm::devices
