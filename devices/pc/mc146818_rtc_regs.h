// The MC146818A's register map as a PC sees it, shared by the two halves of Mc146818Rtc: its
// register file (mc146818_rtc.cc) and its flags and interrupt timer
// (mc146818_rtc_interrupts.cc). Internal to the device; a guest's view of these is the data
// sheet's (Figure 3 "Address map" and the register A-D tables).
#pragma once

#include <cstdint>

namespace minivmm::devices::mc146818 {

// Register indexes (0x32 is the PC's century byte).
inline constexpr std::uint8_t kRegSeconds = 0x00;
inline constexpr std::uint8_t kRegSecondsAlarm = 0x01;
inline constexpr std::uint8_t kRegMinutes = 0x02;
inline constexpr std::uint8_t kRegMinutesAlarm = 0x03;
inline constexpr std::uint8_t kRegHours = 0x04;
inline constexpr std::uint8_t kRegHoursAlarm = 0x05;
inline constexpr std::uint8_t kRegDayOfWeek = 0x06;
inline constexpr std::uint8_t kRegDayOfMonth = 0x07;
inline constexpr std::uint8_t kRegMonth = 0x08;
inline constexpr std::uint8_t kRegYear = 0x09;
inline constexpr std::uint8_t kRegA = 0x0a;
inline constexpr std::uint8_t kRegB = 0x0b;
inline constexpr std::uint8_t kRegC = 0x0c;
inline constexpr std::uint8_t kRegD = 0x0d;
inline constexpr std::uint8_t kRegCentury = 0x32;

// Register A.
inline constexpr std::uint8_t kRegAUip = 0x80;
inline constexpr unsigned kRegADividerShift = 4;
inline constexpr std::uint8_t kRegADividerMask = 0x07;
inline constexpr std::uint8_t kRegARateMask = 0x0f;
// DV2-0 = 010 is the PC's 32.768 kHz time base; every other value but reset runs as it here.
inline constexpr std::uint8_t kDivider32Khz = 0x02;
inline constexpr std::uint8_t kDividerReset = 0x06;  // DV2-0 = 11x: divider chain held in reset

// Register B.
inline constexpr std::uint8_t kRegBSet = 0x80;
inline constexpr std::uint8_t kRegBPie = 0x40;
inline constexpr std::uint8_t kRegBAie = 0x20;
inline constexpr std::uint8_t kRegBUie = 0x10;
inline constexpr std::uint8_t kRegBSqwe = 0x08;  // stored only
inline constexpr std::uint8_t kRegBDm = 0x04;    // 1 = binary, 0 = BCD
inline constexpr std::uint8_t kRegB24h = 0x02;
inline constexpr std::uint8_t kRegBDse = 0x01;  // stored only

// Register C.
inline constexpr std::uint8_t kRegCIrqf = 0x80;
inline constexpr std::uint8_t kRegCPf = 0x40;
inline constexpr std::uint8_t kRegCAf = 0x20;
inline constexpr std::uint8_t kRegCUf = 0x10;

// Register D: valid RAM and time (the battery is fine).
inline constexpr std::uint8_t kRegDVrt = 0x80;

// Alarm bytes with both top bits set match any value ("don't care", data sheet alarm section).
inline constexpr std::uint8_t kAlarmDontCare = 0xc0;
inline constexpr std::uint8_t kHourPm = 0x80;

}  // namespace minivmm::devices::mc146818
