// Freshly made devices whose snapshot records device_state_fuzz loads, and from which
// make_device_state_seeds saves the seeds: the same construction on both sides, so a seed is
// a record the fuzz target's device accepts.
//
//   target        what is made
//   kBlk          virtio-blk (inline engine) over a 32 KiB memfd disk, behind a transport
//   kNet          virtio-net over a FakeNetBackend (no scheduler: every call inline)
//   kConsole      virtio-console into a counting sink
//   kFwCfg        fw_cfg with one file ("etc/fuzz", 5 bytes)
//   kPcTestdev    pc-testdev with all 24 lines wired to fake IRQ lines
//   kPit          the i8254 PIT (delay policy, its own timer delivering: no pulse train)
//   kRtc          the MC146818 RTC with 64 MiB of RAM in its CMOS bytes
//   kUart         the 16550A UART with batching and its character timeout
//   kI8042        the i8042 with its keyboard and both IRQ lines
//   kAcpiPm       the ACPI PM block (PM1 event/control, PM timer) with its SCI
//   kPvPanic      pvpanic (its callback does nothing)
//   kPostPort     the POST port
//   kDebugExit    isa-debug-exit (its callback does nothing)
//   kSpeaker      port 0x61 over a PIT of its own
//
// Every board device's record has a target here (issue 34): a device added to the board adds
// its target last, a seed in make_device_state_seeds.cc, and is then covered by the shared
// participation tests (tests/unit/devices/snapshot_participation_test.cc) too.
//
// The board devices run on a fake vm_clock (and rt_clock) that stands at kLoadTime when a
// record is loaded, as a restore sets vm_clock to the snapshot's instant first: the seeds are
// saved before it, so their instants are in the past of every load. After a successful load
// the target runs the device for a while on that clock (drive_board() in device_state_fuzz.cc),
// so a record whose fields pass the checks but overflow later is found too.
//
// The virtio devices share 64 KiB of guest RAM (FakeGuestRam), cleared per input by the
// caller; the records' ring addresses point into it.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "devices/bus/byte_sink.h"
#include "devices/pc/acpi_pm.h"
#include "devices/pc/debug_exit.h"
#include "devices/pc/i8042.h"
#include "devices/pc/i8254/i8254_pit.h"
#include "devices/pc/i8254/i8254_speaker_port.h"
#include "devices/pc/mc146818_rtc.h"
#include "devices/pc/post_port.h"
#include "devices/pc/pvpanic.h"
#include "devices/pc/uart_16550.h"
#include "devices/bus/device_state.h"
#include "devices/host/block_file.h"
#include "devices/testdev/fw_cfg.h"
#include "devices/testdev/pc_testdev.h"
#include "devices/virtio/blk/virtio_blk.h"
#include "devices/virtio/net/virtio_net.h"
#include "devices/virtio/virtio_console.h"
#include "devices/virtio/virtio_mmio_transport.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_irq_line.h"
#include "tests/support/fake_net_backend.h"
#include "tests/support/fake_virtio_driver.h"
#include "timers/timer_list.h"

namespace minivmm::fuzz {

// New targets go last: a seed's first byte is its target.
enum class StateTarget : std::uint8_t {
  kBlk,
  kNet,
  kConsole,
  kFwCfg,
  kPcTestdev,
  kPit,
  kRtc,
  kUart,
  kI8042,
  kAcpiPm,
  kPvPanic,
  kPostPort,
  kDebugExit,
  kSpeaker,
  kCount
};

// Where the fake vm_clock stands when a record is loaded, and where seeds start (before it).
inline constexpr timers::Nanos kLoadTime{100'000'000'000};
inline constexpr timers::Nanos kSeedTime{10'000'000'000};

inline constexpr std::size_t kStateRamBytes = 0x10000;
inline constexpr std::size_t kStateDiskBytes = 64 * 512;

// One memfd disk per process, refilled with the same pattern per input.
inline int state_disk_fd() {
  static const int fd = [] {
    const int f = ::memfd_create("device-state-fuzz", MFD_CLOEXEC);
    if (f < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    return f;
  }();
  return fd;
}

inline void refill_state_disk() {
  static const std::vector<std::uint8_t> pattern = [] {
    std::vector<std::uint8_t> d(kStateDiskBytes);
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(i / 512 + 1);
    return d;
  }();
  if (::ftruncate(state_disk_fd(), 0) != 0 ||
      ::pwrite(state_disk_fd(), pattern.data(), pattern.size(), 0) !=
          static_cast<ssize_t>(pattern.size())) {
    std::perror("refilling the disk");
    std::abort();
  }
}

class CountingSink final : public devices::ByteSink {
 public:
  void write(std::span<const std::uint8_t> bytes) noexcept override { total += bytes.size(); }
  std::size_t total = 0;
};

// One device of `target`, fresh. transport() is null for the board devices.
class StateRig {
 public:
  StateRig(StateTarget target, const testing::FakeGuestRam& ram, timers::Nanos now = kLoadTime)
      : target_(target), clock_(now) {
    switch (target) {
      case StateTarget::kPit:
        pit_ = std::make_unique<devices::I8254Pit>(vm_timers_, irq_);
        break;
      case StateTarget::kRtc:
        rtc_ = std::make_unique<devices::Mc146818Rtc>(vm_timers_, wall_, irq_, 64ull << 20);
        break;
      case StateTarget::kUart:
        uart_ = std::make_unique<devices::Uart16550>(irq_, sink_, &rt_timers_, &vm_timers_);
        break;
      case StateTarget::kI8042:
        i8042_ = std::make_unique<devices::I8042>([] {}, &irq_, &aux_irq_);
        break;
      case StateTarget::kAcpiPm:
        acpi_pm_ = std::make_unique<devices::AcpiPm>(vm_timers_, irq_,
                                                     devices::AcpiPm::Callbacks{});
        break;
      case StateTarget::kPvPanic:
        pvpanic_ = std::make_unique<devices::PvPanic>([] {});
        break;
      case StateTarget::kPostPort:
        post_ = std::make_unique<devices::PostPort>();
        break;
      case StateTarget::kDebugExit:
        debug_exit_ = std::make_unique<devices::DebugExit>([](int) {});
        break;
      case StateTarget::kSpeaker:
        pit_ = std::make_unique<devices::I8254Pit>(vm_timers_, irq_);
        speaker_ = std::make_unique<devices::I8254SpeakerPort>(*pit_);
        break;
      case StateTarget::kBlk:
        blk_ = std::make_unique<devices::VirtioBlk>(
            devices::BlockFile::open("/proc/self/fd/" + std::to_string(state_disk_fd()), false),
            "fuzz", /*use_worker=*/false);
        transport_ = std::make_unique<devices::VirtioMmioTransport>(*blk_, ram.ram(), irq_);
        break;
      case StateTarget::kNet:
        net_ = std::make_unique<devices::VirtioNet>(backend_, nullptr);
        transport_ = std::make_unique<devices::VirtioMmioTransport>(*net_, ram.ram(), irq_);
        break;
      case StateTarget::kConsole:
        console_ = std::make_unique<devices::VirtioConsole>(sink_);
        transport_ = std::make_unique<devices::VirtioMmioTransport>(*console_, ram.ram(), irq_);
        break;
      case StateTarget::kFwCfg:
        fw_cfg_ = std::make_unique<devices::FwCfg>(devices::FwCfgConfig{64ull << 20, 2, 4});
        fw_cfg_->add_file("etc/fuzz", {1, 2, 3, 4, 5});
        break;
      case StateTarget::kPcTestdev:
      case StateTarget::kCount: {
        std::array<devices::IrqLine*, devices::PcTestdevIrq::kLines> wires{};
        for (std::size_t i = 0; i < wires.size(); ++i) wires[i] = &lines_[i];
        testdev_ = std::make_unique<devices::PcTestdev>(wires, [](std::uint64_t) { return true; });
        break;
      }
    }
  }
  StateRig(const StateRig&) = delete;
  StateRig& operator=(const StateRig&) = delete;
  ~StateRig() {
    // A VMM resets its virtio devices before it drops them.
    if (transport_) {
      testing::FakeMmioDriver(*transport_).write(devices::VirtioMmioTransport::kStatus, 0);
    }
  }

  StateTarget target() const { return target_; }
  devices::StatefulDevice& device() {
    if (transport_) return *transport_;
    if (fw_cfg_) return *fw_cfg_;
    if (speaker_) return *speaker_;
    if (pit_) return *pit_;
    if (acpi_pm_) return *acpi_pm_;
    if (pvpanic_) return *pvpanic_;
    if (post_) return *post_;
    if (debug_exit_) return *debug_exit_;
    if (rtc_) return *rtc_;
    if (uart_) return *uart_;
    if (i8042_) return *i8042_;
    return *testdev_;
  }
  // The board device's port window, or null for the others.
  devices::PortIoDevice* ports() {
    if (speaker_) return speaker_.get();
    if (pit_) return pit_.get();
    if (acpi_pm_) return acpi_pm_.get();
    if (pvpanic_) return pvpanic_.get();
    if (post_) return post_.get();
    if (debug_exit_) return debug_exit_.get();
    if (rtc_) return rtc_.get();
    if (uart_) return uart_.get();
    if (i8042_) return i8042_.get();
    return nullptr;
  }
  testing::FakeClock& clock() { return clock_; }
  timers::TimerList& vm_timers() { return vm_timers_; }
  timers::TimerList& rt_timers() { return rt_timers_; }
  devices::VirtioMmioTransport* transport() { return transport_.get(); }
  devices::VirtioConsole* console() { return console_.get(); }
  devices::FwCfg* fw_cfg() { return fw_cfg_.get(); }
  devices::PcTestdev* testdev() { return testdev_.get(); }
  testing::FakeNetBackend& backend() { return backend_; }

 private:
  StateTarget target_;
  testing::FakeClock clock_;
  testing::FakeClock wall_{timers::Nanos{1'700'000'000'000'000'000}};  // 2023, for the RTC
  timers::TimerList vm_timers_{timers::ClockType::kVm, clock_};
  timers::TimerList rt_timers_{timers::ClockType::kRt, clock_};
  testing::FakeIrqLine irq_;
  testing::FakeIrqLine aux_irq_;
  testing::FakeNetBackend backend_;
  CountingSink sink_;
  std::array<testing::FakeIrqLine, devices::PcTestdevIrq::kLines> lines_;
  std::unique_ptr<devices::VirtioBlk> blk_;
  std::unique_ptr<devices::VirtioNet> net_;
  std::unique_ptr<devices::VirtioConsole> console_;
  std::unique_ptr<devices::FwCfg> fw_cfg_;
  std::unique_ptr<devices::PcTestdev> testdev_;
  std::unique_ptr<devices::I8254Pit> pit_;
  std::unique_ptr<devices::Mc146818Rtc> rtc_;
  std::unique_ptr<devices::Uart16550> uart_;
  std::unique_ptr<devices::I8042> i8042_;
  std::unique_ptr<devices::AcpiPm> acpi_pm_;
  std::unique_ptr<devices::PvPanic> pvpanic_;
  std::unique_ptr<devices::PostPort> post_;
  std::unique_ptr<devices::DebugExit> debug_exit_;
  std::unique_ptr<devices::I8254SpeakerPort> speaker_;  // after pit_: goes first
  std::unique_ptr<devices::VirtioMmioTransport> transport_;  // last: goes first
};

}  // namespace minivmm::fuzz
