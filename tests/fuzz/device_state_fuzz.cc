// libFuzzer target: snapshot records (issue 23) are input when they come from a file, so each
// device's load_state() must refuse what it could never have saved (StateError) and survive
// anything. The first byte picks the device (device_state_rig.h, modulo the count), the rest is
// its record, loaded into a freshly made device as a restore does.
//
// Checks, when a record is accepted: the device saves again without complaint (a loaded device
// holds no chain in flight), that record loads into another fresh device and saves the same
// bytes (what we accept we can write back and read again); then that device is driven (notifies,
// register reads, a reset; fw_cfg and pc-testdev reads; the board devices run two seconds of
// their timers with port reads), which ASan/UBSan watch: a field that passed the checks but
// overflows once the device runs is found here. Any exception but StateError escapes and aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "tests/fuzz/device_state_rig.h"
#include "tests/support/time_driver.h"

namespace {

using minivmm::devices::StateError;
using minivmm::devices::StateReader;
using minivmm::devices::StateWriter;
using minivmm::fuzz::StateRig;
using minivmm::fuzz::StateTarget;
using T = minivmm::devices::VirtioMmioTransport;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "device_state_fuzz: %s\n", what);
  std::abort();
}

std::vector<std::uint8_t> save(StateRig& rig) {
  StateWriter w;
  try {
    rig.device().save_state(w);
  } catch (const StateError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fail("a device that loaded a record refuses to save");
  }
  return w.data();
}

// True if the device took the record.
bool load(StateRig& rig, std::span<const std::uint8_t> record) {
  StateReader r(record, std::string(rig.device().state_key()));
  try {
    rig.device().load_state(r);
  } catch (const StateError&) {
    return false;
  }
  return true;
}

// A board device, run on its fake clocks for two seconds of vm_clock (timers fire at every
// deadline in order, a periodic PIT or RTC at its rate), with the guest reading every port of
// its window now and then: what arithmetic a loaded record feeds runs here under UBSan.
void drive_board(StateRig& rig, minivmm::devices::PortIoDevice& ports) {
  using namespace std::chrono_literals;
  for (int step = 0; step < 20; ++step) {
    minivmm::testing::advance(rig.clock(), {&rig.vm_timers(), &rig.rt_timers()}, 100ms);
    for (std::uint16_t off = 0; off < 8; ++off) {
      std::uint8_t b = 0;
      ports.read(off, std::span(&b, 1));
    }
  }
}

void drive(StateRig& rig) {
  if (auto* ports = rig.ports()) {
    drive_board(rig, *ports);
    (void)save(rig);  // what it ran into saves again
    return;
  }
  if (T* t = rig.transport()) {
    minivmm::testing::FakeMmioDriver drv(*t);
    for (std::uint32_t q = 0; q < 3; ++q) {
      drv.notify(q);
      drv.write(T::kQueueSel, q);
      (void)drv.read(T::kQueueReady);
      (void)drv.read(T::kQueueNumMax);
    }
    (void)drv.read(T::kStatus);
    (void)drv.read(T::kInterruptStatus);
    rig.backend().inject(std::vector<std::uint8_t>(60, 0xab));
    if (rig.console() != nullptr) {
      const std::uint8_t in[] = {'x', 'y'};
      rig.console()->receive(in);
      rig.console()->flush_transmit();
    }
    drv.write(T::kStatus, 0);
    return;
  }
  if (auto* fw = rig.fw_cfg()) {
    for (int i = 0; i < 8; ++i) {
      std::uint8_t b = 0;
      fw->read(1, std::span(&b, 1));
    }
    return;
  }
  auto* dev = rig.testdev();
  std::uint8_t buf[4] = {};
  dev->echo().read(0, buf);
  dev->iomem().read(0xfffc, buf);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto target =
      static_cast<StateTarget>(data[0] % static_cast<std::uint8_t>(StateTarget::kCount));
  const std::span<const std::uint8_t> record(data + 1, size - 1);
  static minivmm::testing::FakeGuestRam ram(minivmm::fuzz::kStateRamBytes);
  ram.fill(0, ram.size(), 0);
  if (target == StateTarget::kBlk) minivmm::fuzz::refill_state_disk();

  // One device at a time, as a restore makes them: a read-write drive is open in one only.
  std::vector<std::uint8_t> saved;
  {
    StateRig first(target, ram);
    if (!load(first, record)) return 0;
    saved = save(first);
  }
  StateRig second(target, ram);
  if (!load(second, saved)) fail("a record a device saved is refused by a fresh one");
  if (save(second) != saved) fail("a reloaded record saves differently");
  drive(second);
  return 0;
}
