// One template for every device's snapshot record (issue 34), after crosvm's
// suspendable_tests!: each device the board or a virtio slot can hold is made by the same rig
// the device_state fuzz target loads records into (tests/fuzz/device_state_rig.h), so a device
// added there gets these cases and the fuzzer at once:
//   - round trip: a device a guest has used saves a record a fresh twin (at the same vm_clock
//     instant) loads and saves again byte for byte; board twins then run on and look alike;
//   - truncation: the record cut short, and one byte longer, is refused with StateError;
//   - hostile: another layout version is refused; a byte set to a value the device never had
//     is refused with StateError or loads into a device that saves and reloads the same.
// And the participation itself: a device that declares none does not build (the concept,
// here, and tests/compile_fail for the real error).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "devices/bus/device_state.h"
#include "devices/virtio/virtio_device.h"
#include "tests/fuzz/device_state_rig.h"
#include "tests/support/time_driver.h"

namespace minivmm::devices {
namespace {

using namespace std::chrono_literals;
using fuzz::StateRig;
using fuzz::StateTarget;
using testing::FakeGuestRam;
using testing::FakeMmioDriver;
using testing::FakeQueue;
using Bytes = std::vector<std::uint8_t>;

// --- Participation is declared, or the device does not build ---------------------------------

struct Forgotten : ReportingDevice {
  std::string_view report_key() const noexcept override { return "forgotten"; }
  void report(ReportWriter&) const override {}
};
struct DeclaredStateless : Forgotten {
  static constexpr std::string_view kStatelessBecause = "its only output ends the run";
};
static_assert(!SnapshotParticipant<Forgotten>);
static_assert(SnapshotParticipant<DeclaredStateless>);
static_assert(SnapshotParticipant<Uart16550> && SnapshotParticipant<I8254Pit> &&
              SnapshotParticipant<I8254SpeakerPort> && SnapshotParticipant<Mc146818Rtc> &&
              SnapshotParticipant<I8042> && SnapshotParticipant<AcpiPm> &&
              SnapshotParticipant<PvPanic> && SnapshotParticipant<PostPort> &&
              SnapshotParticipant<DebugExit> && SnapshotParticipant<FwCfg> &&
              SnapshotParticipant<PcTestdev>);

// A virtio device that implements everything but its record stays abstract: it cannot be made.
struct VirtioForgotten : VirtioDevice {
  std::string_view name() const noexcept override { return "forgotten"; }
  std::uint32_t device_id() const noexcept override { return 1; }
  std::uint64_t device_features() const noexcept override { return 0; }
  std::size_t num_queues() const noexcept override { return 1; }
  void read_config(std::uint64_t, std::span<std::uint8_t>) noexcept override {}
  void activate(VirtioQueueHost&, std::uint64_t) noexcept override {}
  void queue_notify(std::size_t) noexcept override {}
  void reset() noexcept override {}
};
static_assert(std::is_abstract_v<VirtioForgotten>);
static_assert(!std::is_abstract_v<VirtioBlk> && !std::is_abstract_v<VirtioNet> &&
              !std::is_abstract_v<VirtioConsole>);

TEST(SnapshotParticipationTest, DeclaredStatelessCarriesItsReason) {
  DeclaredStateless d;
  const SnapshotParticipation p = participation_of(d);
  EXPECT_TRUE(p.declared());
  EXPECT_TRUE(p.records.empty());
  EXPECT_EQ(p.stateless_because, "its only output ends the run");
  EXPECT_FALSE(SnapshotParticipation{}.declared());
}

// --- The shared cases, one instance per device ------------------------------------------------

void out(PortIoDevice& d, std::uint16_t offset, std::uint8_t v) {
  d.write(offset, std::span<const std::uint8_t>(&v, 1));
}

Bytes save(StateRig& rig) {
  if (rig.transport() != nullptr) rig.transport()->quiesce();
  StateWriter w;
  rig.device().save_state(w);
  return w.data();
}

void load(StateRig& rig, const Bytes& record) {
  StateReader r(record, std::string(rig.device().state_key()));
  rig.device().load_state(r);
}

// What a guest leaves behind: a driver's bring-up and one served buffer on a virtio device,
// register writes and 1.5 s of its clocks on a board device.
void exercise(StateRig& rig, FakeGuestRam& mem) {
  constexpr std::uint64_t kBuf = 0xb000;
  if (VirtioMmioTransport* t = rig.transport()) {
    FakeQueue q0(mem, 0x1000, 16), q1(mem, 0x2000, 16);
    FakeMmioDriver drv(*t);
    if (rig.target() == StateTarget::kBlk) {
      drv.bring_up(kVirtioFVersion1, {&q0});
    } else {
      drv.bring_up(kVirtioFVersion1, {&q0, &q1});
    }
    if (rig.target() == StateTarget::kNet) {
      q0.add_chain(0, {{kBuf, 0x800, true}});
      drv.notify(0);
      rig.backend().inject(Bytes(60, 0x11));
    } else if (rig.target() == StateTarget::kConsole) {
      std::memcpy(mem.at(kBuf), "hello\n", 6);
      q1.add_chain(0, {{kBuf, 6, false}});
      drv.notify(1);
    }
    return;
  }
  if (FwCfg* fw = rig.fw_cfg()) {
    const std::uint8_t key[2] = {0x20, 0x00};
    fw->write(0, key);
    std::uint8_t b = 0;
    fw->read(1, std::span(&b, 1));
    return;
  }
  if (PcTestdev* dev = rig.testdev()) {
    const std::uint8_t echo[4] = {0x78, 0x56, 0x34, 0x12}, one[1] = {1};
    dev->echo().write(0, echo);
    dev->irq().write(4, one);
    return;
  }
  PortIoDevice& p = *rig.ports();
  switch (rig.target()) {
    case StateTarget::kPit:
      out(p, 3, 0x34);  // counter 0, mode 2, 250 Hz
      out(p, 0, 0xa5);
      out(p, 0, 0x12);
      break;
    case StateTarget::kRtc:
      out(p, 0, 0x0a);
      out(p, 1, 0x26);  // 1024 Hz periodic rate
      out(p, 0, 0x0b);
      out(p, 1, 0x62);  // periodic and alarm interrupts, 24-hour mode
      break;
    case StateTarget::kUart:
      out(p, 3, 0x83);
      out(p, 0, 0x01);
      out(p, 3, 0x03);
      out(p, 2, 0xc7);
      out(p, 1, 0x0f);
      out(p, 7, 0x5a);
      out(p, 0, 'x');
      break;
    case StateTarget::kI8042:
      out(p, 4, 0x60);
      out(p, 0, 0x47);
      out(p, 0, 0xf2);  // the keyboard's answer queued
      break;
    case StateTarget::kAcpiPm:
      out(p, 2, 0x21);  // TMR_EN, PWRBTN_EN
      out(p, 4, 0x01);  // SCI_EN
      break;
    case StateTarget::kPvPanic:
      out(p, 0, 0x02);
      break;
    case StateTarget::kPostPort:
      out(p, 0, 0x55);
      break;
    case StateTarget::kDebugExit: {
      const std::uint8_t wide[8] = {};
      p.write(0, wide);  // refused, counted
      break;
    }
    case StateTarget::kSpeaker:
      out(p, 0, 0x03);
      break;
    default:
      FAIL() << "a board target without a guest's writes: add them here";
  }
  testing::advance(rig.clock(), {&rig.vm_timers(), &rig.rt_timers()}, 1500ms);
}

// A board device run on for two seconds with its ports read now and then: what the guest sees,
// and the record it ends with.
Bytes observe(StateRig& rig) {
  Bytes seen;
  if (rig.ports() == nullptr) return seen;
  for (int step = 0; step < 4; ++step) {
    testing::advance(rig.clock(), {&rig.vm_timers(), &rig.rt_timers()}, 500ms);
    for (std::uint16_t off = 0; off < 8; ++off) {
      std::uint8_t b = 0;
      rig.ports()->read(off, std::span(&b, 1));
      seen.push_back(b);
    }
  }
  const Bytes after = save(rig);
  seen.insert(seen.end(), after.begin(), after.end());
  return seen;
}

class DeviceStateTemplate : public ::testing::TestWithParam<StateTarget> {
 protected:
  void SetUp() override {
    mem_.fill(0, mem_.size(), 0);
    if (GetParam() == StateTarget::kBlk) fuzz::refill_state_disk();
  }
  // A used device's record, and the instant it was saved at.
  Bytes used_record(timers::Nanos* at = nullptr, Bytes* seen = nullptr) {
    StateRig rig(GetParam(), mem_, fuzz::kSeedTime);
    exercise(rig, mem_);
    Bytes rec = save(rig);
    if (at != nullptr) *at = rig.clock().now();
    if (seen != nullptr) *seen = observe(rig);
    return rec;
  }
  // Whether a fresh device takes `record`; when it does, it must save what reloads the same.
  bool takes(const Bytes& record) {
    Bytes again;
    {
      StateRig rig(GetParam(), mem_);
      try {
        load(rig, record);
      } catch (const StateError&) {
        return false;
      }
      again = save(rig);
    }
    StateRig twin(GetParam(), mem_);
    load(twin, again);
    EXPECT_EQ(save(twin), again);
    return true;
  }
  FakeGuestRam mem_{fuzz::kStateRamBytes};
};

TEST_P(DeviceStateTemplate, RoundTripMakesATwin) {
  Bytes fresh;
  {
    StateRig rig(GetParam(), mem_, fuzz::kSeedTime);
    fresh = save(rig);
  }
  timers::Nanos at{};
  Bytes seen_a;
  const Bytes rec = used_record(&at, &seen_a);
  EXPECT_NE(rec, fresh) << "the guest's writes left nothing in the record";
  StateRig b(GetParam(), mem_, at);
  load(b, rec);
  EXPECT_EQ(save(b), rec);
  EXPECT_EQ(observe(b), seen_a);
}

TEST_P(DeviceStateTemplate, TruncatedAndLongerRecordsAreRefused) {
  const Bytes rec = used_record();
  ASSERT_FALSE(rec.empty());
  // Every cut for small records; a large one (pc-testdev's 64 KiB buffer) at its edges.
  std::vector<std::size_t> cuts;
  for (std::size_t n = 0; n < rec.size(); ++n) {
    if (n < 512 || rec.size() - n < 64 || n % 4093 == 0) cuts.push_back(n);
  }
  for (std::size_t n : cuts) {
    EXPECT_FALSE(takes(Bytes(rec.begin(), rec.begin() + static_cast<std::ptrdiff_t>(n)))) << n;
  }
  Bytes longer = rec;
  longer.push_back(0);
  EXPECT_FALSE(takes(longer));
}

TEST_P(DeviceStateTemplate, HostileRecordsAreRefusedOrLoadCleanly) {
  const Bytes rec = used_record();
  Bytes other_version = rec;
  other_version[0] = static_cast<std::uint8_t>(other_version[0] + 1);
  EXPECT_FALSE(takes(other_version));
  const std::size_t n = std::min<std::size_t>(rec.size(), 256);
  for (std::size_t i = 1; i < n; ++i) {
    for (std::uint8_t v : {std::uint8_t{0xff}, std::uint8_t{0x00}, std::uint8_t{0x80}}) {
      if (rec[i] == v) continue;
      Bytes bad = rec;
      bad[i] = v;
      (void)takes(bad);  // its checks are inside: refused, or a record that reloads the same
    }
  }
}

std::vector<StateTarget> every_target() {
  std::vector<StateTarget> all;
  for (int t = 0; t < static_cast<int>(StateTarget::kCount); ++t) {
    all.push_back(static_cast<StateTarget>(t));
  }
  return all;
}

std::string target_name(const ::testing::TestParamInfo<StateTarget>& info) {
  static const char* const names[] = {"Blk",    "Net",     "Console",  "FwCfg",
                                      "PcTestdev", "Pit",  "Rtc",      "Uart",
                                      "I8042",  "AcpiPm",  "PvPanic",  "PostPort",
                                      "DebugExit", "Speaker"};
  static_assert(std::size(names) == static_cast<std::size_t>(StateTarget::kCount),
                "a new StateTarget needs its name here");
  return names[static_cast<std::size_t>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(EveryDevice, DeviceStateTemplate, ::testing::ValuesIn(every_target()),
                         target_name);

// The devices with a port window of their own (the others are named by their owner: a virtio
// transport, the board), found by building each, so a new port device is in without a list.
std::vector<StateTarget> port_targets() {
  std::vector<StateTarget> out;
  FakeGuestRam ram{fuzz::kStateRamBytes};
  for (const StateTarget t : every_target()) {
    if (t == StateTarget::kBlk) fuzz::refill_state_disk();
    if (StateRig(t, ram).ports() != nullptr) out.push_back(t);
  }
  return out;
}

class PortDeviceName : public ::testing::TestWithParam<StateTarget> {
 protected:
  FakeGuestRam mem_{fuzz::kStateRamBytes};
};

TEST(PortDeviceNameSet, HoldsTheLegacyPcDevices) {
  // The filter must not come back empty (the parameterised test would then test nothing).
  const auto ports = port_targets();
  EXPECT_GE(ports.size(), 8u);
  EXPECT_NE(std::find(ports.begin(), ports.end(), StateTarget::kPit), ports.end());
  EXPECT_EQ(std::find(ports.begin(), ports.end(), StateTarget::kBlk), ports.end());
}

// One name per device (issue 34): its snapshot section is its report key is what its port
// window calls it in the logs (the board's slot has it too: board_participation_test.cc).
TEST_P(PortDeviceName, OneNameForItsRecordItsReportAndItsPorts) {
  StateRig rig(GetParam(), mem_);
  ASSERT_NE(rig.ports(), nullptr);
  EXPECT_EQ(rig.device().state_key(), rig.ports()->name());
  if (const auto* r = dynamic_cast<const ReportingDevice*>(&rig.device())) {
    EXPECT_EQ(rig.device().state_key(), r->report_key());
  } else {
    EXPECT_EQ(GetParam(), StateTarget::kSpeaker);  // port 0x61 is the PIT's; "port61"
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPortDevice, PortDeviceName, ::testing::ValuesIn(port_targets()),
                         target_name);

}  // namespace
}  // namespace minivmm::devices
