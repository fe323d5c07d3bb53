// The 8042 with a keyboard that has no keys and no mouse: controller commands, the keyboard's
// command answers and interrupts, the reset paths, the Linux probe sequence, and that bad
// accesses are ignored and counted.
#include "devices/pc/i8042.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "devices/pc/i8254/i8254_pit.h"
#include "devices/pc/i8254/i8254_speaker_port.h"
#include "devices/bus/io_bus.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/map_report_writer.h"
#include "timers/timer_list.h"

namespace {

using minivmm::devices::I8042;

struct KbcRig {
  void command(std::uint8_t value) { device.write(I8042::kCommandOffset, std::span(&value, 1)); }
  void data(std::uint8_t value) { device.write(I8042::kDataOffset, std::span(&value, 1)); }
  std::uint8_t status() { return read(I8042::kCommandOffset); }
  std::uint8_t read_data() { return read(I8042::kDataOffset); }
  std::uint8_t read(std::uint16_t offset) {
    std::uint8_t value = 0;
    device.read(offset, std::span(&value, 1));
    return value;
  }

  // Every byte the output buffer delivers until it is empty.
  std::vector<std::uint8_t> drain() {
    std::vector<std::uint8_t> out;
    while ((status() & I8042::kStatusOutputFull) != 0 && out.size() < 64) {
      out.push_back(read_data());
    }
    return out;
  }

  int resets = 0;
  minivmm::testing::FakeIrqLine kbd_irq;
  minivmm::testing::FakeIrqLine aux_irq;
  I8042 device{[this] { ++resets; }, &kbd_irq, &aux_irq};
};

using Bytes = std::vector<std::uint8_t>;

TEST(I8042Test, ResetCommandCallsOnReset) {
  KbcRig rig;
  rig.command(I8042::kCmdResetCpu);
  EXPECT_EQ(rig.resets, 1);
  EXPECT_EQ(rig.device.stats().reset_requests, 1u);
}

TEST(I8042Test, PulseOutputPortResetsOnlyWhenBit0IsPulsed) {
  KbcRig rig;
  rig.command(0xff);  // pulse nothing
  rig.command(0xfd);  // pulse bit 1 (A20) only
  EXPECT_EQ(rig.resets, 0);
  rig.command(0xf0);  // pulse bits 0-3
  EXPECT_EQ(rig.resets, 1);
  EXPECT_EQ(rig.device.stats().unknown_commands, 0u);
}

TEST(I8042Test, WritingOutputPortWithBit0ClearResets) {
  KbcRig rig;
  rig.command(I8042::kCmdWriteOutputPort);
  rig.data(I8042::kOutPortResetN | I8042::kOutPortA20);
  EXPECT_EQ(rig.resets, 0);
  rig.command(I8042::kCmdReadOutputPort);
  EXPECT_EQ(rig.read_data(), I8042::kOutPortResetN | I8042::kOutPortA20);
  rig.command(I8042::kCmdWriteOutputPort);
  rig.data(I8042::kOutPortA20);
  EXPECT_EQ(rig.resets, 1);
}

TEST(I8042Test, ResetCallbackMayCallBackIntoTheDevice) {
  std::uint64_t seen_requests = 0;
  I8042* self = nullptr;
  I8042 device{[&] { seen_requests = self->stats().reset_requests; }};
  self = &device;
  const std::uint8_t reset = I8042::kCmdResetCpu;
  device.write(I8042::kCommandOffset, std::span(&reset, 1));  // would deadlock if mu_ were held
  EXPECT_EQ(seen_requests, 1u);
}

TEST(I8042Test, SelfTestAnswers55AndSetsSystemFlag) {
  KbcRig rig;
  rig.command(I8042::kCmdSelfTest);
  EXPECT_NE(rig.status() & I8042::kStatusOutputFull, 0);
  EXPECT_NE(rig.status() & I8042::kStatusSystemFlag, 0);
  EXPECT_EQ(rig.read_data(), I8042::kSelfTestPassed);
  EXPECT_EQ(rig.status() & I8042::kStatusOutputFull, 0);
}

TEST(I8042Test, CommandByteIsReadAndWritten) {
  KbcRig rig;
  rig.command(I8042::kCmdReadCtr);
  EXPECT_EQ(rig.read_data(), I8042::kCtrKbdInt | I8042::kCtrSystemFlag | I8042::kCtrTranslate);
  rig.command(I8042::kCmdWriteCtr);
  EXPECT_NE(rig.status() & I8042::kStatusCommand, 0);  // last write went to port 0x64
  rig.data(0x30);  // both interfaces disabled, system flag clear
  EXPECT_EQ(rig.status() & I8042::kStatusCommand, 0);
  EXPECT_EQ(rig.status() & I8042::kStatusSystemFlag, 0);  // follows command byte bit 2
  rig.command(I8042::kCmdReadCtr);
  EXPECT_EQ(rig.read_data(), 0x30);
}

TEST(I8042Test, InterfaceTestsReportNoError) {
  KbcRig rig;
  rig.command(I8042::kCmdKbdTest);
  EXPECT_EQ(rig.read_data(), I8042::kInterfaceTestPassed);
  rig.command(I8042::kCmdAuxTest);
  EXPECT_EQ(rig.read_data(), I8042::kInterfaceTestPassed);
}

TEST(I8042Test, InterfaceEnableAndDisableShowInCommandByte) {
  // Linux's i8042_toggle_aux() checks exactly this.
  KbcRig rig;
  const auto ctr = [&] {
    rig.command(I8042::kCmdReadCtr);
    return rig.read_data();
  };
  rig.command(I8042::kCmdAuxDisable);
  EXPECT_NE(ctr() & I8042::kCtrAuxDisable, 0);
  rig.command(I8042::kCmdAuxEnable);
  EXPECT_EQ(ctr() & I8042::kCtrAuxDisable, 0);
  rig.command(I8042::kCmdKbdDisable);
  EXPECT_NE(ctr() & I8042::kCtrKbdDisable, 0);
  rig.command(I8042::kCmdKbdEnable);
  EXPECT_EQ(ctr() & I8042::kCtrKbdDisable, 0);
}

TEST(I8042Test, AuxLoopbackReturnsTheByteAsAuxData) {
  // Linux's AUX_LOOP probe (0xD3, 0x5A) must get an answer, or it waits out a timeout.
  KbcRig rig;
  rig.command(I8042::kCmdWriteAuxOutput);
  rig.data(0x5a);
  EXPECT_EQ(rig.status() & (I8042::kStatusOutputFull | I8042::kStatusAuxOutputFull),
            I8042::kStatusOutputFull | I8042::kStatusAuxOutputFull);
  EXPECT_EQ(rig.read_data(), 0x5a);
  EXPECT_EQ(rig.status() & (I8042::kStatusOutputFull | I8042::kStatusAuxOutputFull), 0);
  rig.command(I8042::kCmdWriteKbdOutput);
  rig.data(0xa5);
  EXPECT_EQ(rig.status() & I8042::kStatusAuxOutputFull, 0);
  EXPECT_EQ(rig.read_data(), 0xa5);
}

TEST(I8042Test, BytesForTheAbsentMouseAreDroppedWithTimeout) {
  KbcRig rig;
  rig.command(I8042::kCmdWriteAux);
  rig.data(0xf4);  // mouse enable: nobody there
  EXPECT_NE(rig.status() & I8042::kStatusTimeout, 0);
  EXPECT_EQ(rig.status() & I8042::kStatusOutputFull, 0);
  rig.command(I8042::kCmdReadCtr);
  EXPECT_EQ(rig.status() & I8042::kStatusTimeout, 0);  // a new command clears it
  EXPECT_EQ(rig.device.stats().device_bytes_dropped, 1u);
}

// The probe that found the bug: after set-up the idle status is 0x14 (system flag, keylock
// off), and no keyboard command leaves the timeout bit behind.
TEST(I8042Test, IdleStatusIs14AndKeyboardCommandsNeverTimeOut) {
  KbcRig rig;
  EXPECT_EQ(rig.status(), 0x14);
  for (std::uint8_t cmd : Bytes{0xee, 0xf2, 0xf4, 0xf5, 0xf6, 0xff}) {
    SCOPED_TRACE(int{cmd});
    rig.data(cmd);
    EXPECT_EQ(rig.status() & I8042::kStatusTimeout, 0);
    EXPECT_FALSE(rig.drain().empty());
    EXPECT_EQ(rig.status(), 0x14);
  }
  EXPECT_EQ(rig.device.stats().device_bytes_dropped, 0u);
}

TEST(I8042Test, KeyboardEchoAnswersEE) {
  KbcRig rig;
  rig.data(0xee);
  EXPECT_EQ(rig.drain(), Bytes{0xee});
}

TEST(I8042Test, KeyboardIdentifyAnswersAckAbAndTheTranslatedId) {
  KbcRig rig;
  rig.data(0xf2);
  EXPECT_EQ(rig.drain(), (Bytes{0xfa, 0xab, 0x41}));  // translation is on after the BIOS
  // Translation off (command byte bit 6 clear): the keyboard's own 0x83.
  rig.command(I8042::kCmdWriteCtr);
  rig.data(I8042::kCtrKbdInt | I8042::kCtrSystemFlag);
  rig.data(0xf2);
  EXPECT_EQ(rig.drain(), (Bytes{0xfa, 0xab, 0x83}));
}

TEST(I8042Test, KeyboardAcknowledgesEveryCommandAndItsParameter) {
  KbcRig rig;
  rig.data(0xed);  // LEDs
  EXPECT_EQ(rig.drain(), Bytes{0xfa});
  rig.data(0x07);
  EXPECT_EQ(rig.drain(), Bytes{0xfa});
  rig.data(0xf3);  // typematic rate and delay
  EXPECT_EQ(rig.drain(), Bytes{0xfa});
  rig.data(0x20);
  EXPECT_EQ(rig.drain(), Bytes{0xfa});
  rig.data(0xf0);  // select scan code set 2
  EXPECT_EQ(rig.drain(), Bytes{0xfa});
  rig.data(0x02);
  EXPECT_EQ(rig.drain(), Bytes{0xfa});
  for (std::uint8_t cmd : Bytes{0xf4, 0xf5, 0xf6, 0xf7, 0xfa, 0xfd}) {
    rig.data(cmd);
    EXPECT_EQ(rig.drain(), Bytes{0xfa}) << int{cmd};
  }
  rig.data(0xff);  // reset: ACK, then the self-test passed
  EXPECT_EQ(rig.drain(), (Bytes{0xfa, 0xaa}));
  EXPECT_EQ(rig.device.stats().keyboard_unknown, 0u);
  EXPECT_EQ(rig.device.stats().keyboard_bytes, 13u);
}

TEST(I8042Test, ScanCodeSetIsReadBackThroughTranslation) {
  KbcRig rig;
  rig.data(0xf0);
  rig.data(0x00);
  EXPECT_EQ(rig.drain(), (Bytes{0xfa, 0xfa, 0x41}));  // set 2, translated
  rig.data(0xf0);
  rig.data(0x01);
  rig.drain();
  rig.command(I8042::kCmdWriteCtr);
  rig.data(I8042::kCtrSystemFlag);  // translation off
  rig.data(0xf0);
  rig.data(0x00);
  EXPECT_EQ(rig.drain(), (Bytes{0xfa, 0xfa, 0x01}));
  rig.data(0xf0);
  rig.data(0x09);  // no such set
  EXPECT_EQ(rig.drain(), (Bytes{0xfa, 0xfe}));
}

TEST(I8042Test, KeyboardResendsItsLastByteAndRejectsNonsense) {
  KbcRig rig;
  rig.data(0xee);
  rig.drain();
  rig.data(0xfe);
  EXPECT_EQ(rig.drain(), Bytes{0xee});
  rig.data(0x12);  // not a command
  EXPECT_EQ(rig.drain(), Bytes{0xfe});
  EXPECT_EQ(rig.device.stats().keyboard_unknown, 1u);
  // A command byte where a parameter is expected starts that command.
  rig.data(0xed);
  rig.data(0xee);
  EXPECT_EQ(rig.drain(), (Bytes{0xfa, 0xee}));
}

TEST(I8042Test, KeyboardAnswersRaiseIrq1OneByteAtATime) {
  KbcRig rig;
  rig.data(0xf2);
  EXPECT_TRUE(rig.kbd_irq.level());
  EXPECT_EQ(rig.read_data(), 0xfa);
  EXPECT_TRUE(rig.kbd_irq.level());  // the next byte moved in at once
  EXPECT_EQ(rig.read_data(), 0xab);
  EXPECT_EQ(rig.read_data(), 0x41);
  EXPECT_FALSE(rig.kbd_irq.level());
  EXPECT_EQ(rig.kbd_irq.rising_edges(), 3);
  EXPECT_FALSE(rig.aux_irq.level());
  // Command byte bit 0 clear: the buffer fills, the line stays low.
  rig.command(I8042::kCmdWriteCtr);
  rig.data(I8042::kCtrSystemFlag | I8042::kCtrTranslate);
  rig.data(0xee);
  EXPECT_NE(rig.status() & I8042::kStatusOutputFull, 0);
  EXPECT_FALSE(rig.kbd_irq.level());
  EXPECT_EQ(rig.read_data(), 0xee);
}

TEST(I8042Test, AuxDataRaisesIrq12WhenEnabled) {
  KbcRig rig;
  rig.command(I8042::kCmdWriteCtr);
  rig.data(I8042::kCtrKbdInt | I8042::kCtrAuxInt | I8042::kCtrSystemFlag);
  rig.command(I8042::kCmdWriteAuxOutput);
  rig.data(0x5a);
  EXPECT_TRUE(rig.aux_irq.level());
  EXPECT_FALSE(rig.kbd_irq.level());
  EXPECT_EQ(rig.read_data(), 0x5a);
  EXPECT_FALSE(rig.aux_irq.level());
}

TEST(I8042Test, DisabledKeyboardInterfaceHoldsAnswersUntilEnabled) {
  KbcRig rig;
  rig.data(0xf2);
  rig.command(I8042::kCmdKbdDisable);
  EXPECT_EQ(rig.read_data(), 0xfa);  // already in the output buffer
  EXPECT_EQ(rig.status() & I8042::kStatusOutputFull, 0);
  rig.command(I8042::kCmdKbdEnable);
  EXPECT_EQ(rig.drain(), (Bytes{0xab, 0x41}));
  // Sending a byte to the keyboard re-enables its interface, as the chip (and QEMU) do.
  rig.command(I8042::kCmdKbdDisable);
  rig.data(0xee);
  EXPECT_EQ(rig.drain(), Bytes{0xee});
}

TEST(I8042Test, UnreadKeyboardAnswersOverrunItsBuffer) {
  KbcRig rig;
  for (int i = 0; i < 20; ++i) rig.data(0xee);
  // One in the controller's buffer, sixteen in the keyboard's, three lost.
  EXPECT_EQ(rig.drain().size(), 17u);
  EXPECT_EQ(rig.device.stats().keyboard_overruns, 3u);
}

TEST(I8042Test, EmptyOutputBufferReadsTheLastByteAgain) {
  KbcRig rig;
  EXPECT_EQ(rig.read_data(), 0x00);  // nothing ever written
  rig.command(I8042::kCmdSelfTest);
  EXPECT_EQ(rig.read_data(), I8042::kSelfTestPassed);
  EXPECT_EQ(rig.read_data(), I8042::kSelfTestPassed);
  EXPECT_EQ(rig.status() & I8042::kStatusOutputFull, 0);
}

TEST(I8042Test, LinuxFlushSeesEmptyBufferAfterReadingIt) {
  // i8042_flush() reads port 0x60 while OBF is set and gives up after 16 bytes.
  KbcRig rig;
  rig.command(I8042::kCmdReadCtr);
  int reads = 0;
  while ((rig.status() & I8042::kStatusOutputFull) != 0 && reads < 16) {
    rig.read_data();
    ++reads;
  }
  EXPECT_EQ(reads, 1);
}

TEST(I8042Test, NonByteAccessesAreIgnoredAndCounted) {
  KbcRig rig;
  std::vector<std::uint8_t> wide(2, 0);
  rig.device.read(I8042::kDataOffset, wide);
  EXPECT_EQ(wide, (std::vector<std::uint8_t>{0xff, 0xff}));
  const std::vector<std::uint8_t> reset16 = {I8042::kCmdResetCpu, 0};
  rig.device.write(I8042::kCommandOffset, reset16);
  const std::vector<std::uint8_t> reset32 = {I8042::kCmdResetCpu, 0, 0, 0};
  rig.device.write(I8042::kCommandOffset, reset32);
  EXPECT_EQ(rig.resets, 0);
  const auto stats = rig.device.stats();
  EXPECT_EQ(stats.bad_accesses, 3u);
  EXPECT_EQ(stats.reads, 0u);
  EXPECT_EQ(stats.writes, 0u);
}

TEST(I8042Test, OffsetsBetweenTheTwoPortsAreNotRegisters) {
  KbcRig rig;
  EXPECT_EQ(rig.read(1), 0xff);
  const std::uint8_t reset = I8042::kCmdResetCpu;
  rig.device.write(3, std::span(&reset, 1));
  EXPECT_EQ(rig.resets, 0);
  EXPECT_EQ(rig.device.stats().bad_accesses, 2u);
}

TEST(I8042Test, UnknownCommandsAreCounted) {
  KbcRig rig;
  rig.command(0x21);  // read controller RAM byte 1: not emulated
  rig.command(0xc1);
  EXPECT_EQ(rig.device.stats().unknown_commands, 2u);
  EXPECT_EQ(rig.status() & I8042::kStatusOutputFull, 0);
}

TEST(I8042Test, SplitMappingBesidePort61SharesOneController) {
  // On a PC port 0x61 is the PIT's; the 8042 goes on the bus as two one-port views.
  minivmm::testing::FakeClock clock;
  minivmm::timers::TimerList list(minivmm::timers::ClockType::kVm, clock);
  minivmm::testing::FakeIrqLine irq0;
  minivmm::devices::I8254Pit pit(list, irq0);
  minivmm::devices::I8254SpeakerPort port61(pit);
  KbcRig rig;
  minivmm::devices::IoBus bus;
  bus.attach(std::uint16_t{0x60}, 1, rig.device.data_port());
  bus.attach(0x61, 1, port61);  // port B, as on the PC board
  bus.attach(std::uint16_t{0x64}, 1, rig.device.command_port());

  const std::uint8_t self_test = I8042::kCmdSelfTest;
  ASSERT_TRUE(bus.write(std::uint16_t{0x64}, std::span(&self_test, 1)));
  std::uint8_t value = 0;
  ASSERT_TRUE(bus.read(std::uint16_t{0x60}, std::span(&value, 1)));
  EXPECT_EQ(value, I8042::kSelfTestPassed);
  const std::uint8_t reset = I8042::kCmdResetCpu;
  ASSERT_TRUE(bus.write(std::uint16_t{0x64}, std::span(&reset, 1)));
  EXPECT_EQ(rig.resets, 1);
}

TEST(I8042Test, RandomRegisterSweepNeverCrashesAndKeepsInvariants) {
  KbcRig rig;
  std::mt19937 rng(0x8042);
  const std::size_t widths[] = {1, 2, 4};
  for (int i = 0; i < 20000; ++i) {
    const auto offset = static_cast<std::uint16_t>(rng() % I8042::kPortCount);
    std::vector<std::uint8_t> data(widths[rng() % 3]);
    for (auto& b : data) b = static_cast<std::uint8_t>(rng());
    if (rng() % 2 == 0) {
      rig.device.read(offset, data);
    } else {
      rig.device.write(offset, data);
    }
    const std::uint8_t status = rig.status();
    ASSERT_EQ(status & I8042::kStatusInputFull, 0);  // input is always taken at once
    // AUX data implies the output buffer is full; each line implies its kind of data.
    const bool full = (status & I8042::kStatusOutputFull) != 0;
    const bool aux = (status & I8042::kStatusAuxOutputFull) != 0;
    ASSERT_TRUE(!aux || full);
    ASSERT_TRUE(!rig.kbd_irq.level() || (full && !aux));
    ASSERT_TRUE(!rig.aux_irq.level() || (full && aux));
  }
  const auto stats = rig.device.stats();
  EXPECT_EQ(stats.reset_requests, static_cast<std::uint64_t>(rig.resets));
  EXPECT_GT(stats.bad_accesses, 0u);
}

// The run report's "i8042" object: the keys and types --stats always had, the dropped mouse
// bytes under their report name.
TEST(I8042Test, ReportsItsCountersUnderI8042) {
  KbcRig rig;
  rig.command(I8042::kCmdWriteAux);
  rig.data(0xf4);  // for the absent mouse: dropped
  minivmm::testing::MapReportWriter report;
  rig.device.report(report);
  EXPECT_EQ(rig.device.report_key(), "i8042");
  EXPECT_EQ(report.typed_paths(),
            (std::set<std::string>{"bad_accesses number", "keyboard_bytes number",
                                   "keyboard_overruns number", "keyboard_unknown number",
                                   "mouse_bytes_dropped number", "reads number",
                                   "reset_requests number", "unknown_commands number",
                                   "writes number"}));
  EXPECT_EQ(report.counter("mouse_bytes_dropped"), 1u);
  EXPECT_EQ(report.counter("writes"), 2u);
}

}  // namespace
