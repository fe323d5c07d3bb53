// libFuzzer target: every device at its PC address on one IoBus, accessed at any port 0..0xffff
// (input format: fuzz_ops.h; the port field is the absolute port).
//
// Checks, on top of each device rig's own (the *_rig.h headers): the bus answers exactly the
// ports the VMM maps (machine.cc's table, rebuilt here from the rigs' slots) and hands the device
// the right offset; an unmapped port reads all ones and is counted, per port and direction,
// exactly as often as it was accessed.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "devices/bus/io_bus.h"
#include "devices/log/log.h"
#include "tests/fuzz/acpi_pm_rig.h"
#include "tests/fuzz/debug_exit_post_port_rig.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/i8042_rig.h"
#include "tests/fuzz/i8254_pit_rig.h"
#include "tests/fuzz/mc146818_rtc_rig.h"
#include "tests/fuzz/uart_16550_rig.h"

namespace minivmm::fuzz {
namespace {

class BusTarget final : public Target {
 public:
  explicit BusTarget(std::uint8_t config)
      : pit_(env_, config),
        uart_(env_, config),
        rtc_(env_, config, /*owns_vm_timers=*/false),
        kbd_(env_, config),
        debug_(env_, config),
        acpi_(env_, config) {
    for (Rig* rig : rigs_) {
      const auto slots = rig->slots();
      for (std::size_t i = 0; i < slots.size(); ++i) {
        if (!slots[i].pc_port) continue;
        bus_.attach(*slots[i].pc_port, slots[i].length, *slots[i].device);
        routes_.push_back(Route{*slots[i].pc_port, slots[i].length, rig, i});
      }
    }
  }

  Env& env() noexcept override { return env_; }

  void read(std::uint16_t port, std::span<std::uint8_t> data) override {
    const Route* r = route(port);
    if (r != nullptr) r->rig->before_access(r->slot, offset(*r, port));
    bool mapped = false;
    {
      Env::PhaseScope scope(env_, Phase::kGuestAccess);
      mapped = bus_.read(port, data);
    }
    FUZZ_CHECK(mapped == (r != nullptr), "bus read of port 0x%04x: mapped %d, expected %d", port,
               mapped ? 1 : 0, r != nullptr ? 1 : 0);
    if (r != nullptr) {
      r->rig->after_read(r->slot, offset(*r, port), data);
      return;
    }
    FUZZ_CHECK(std::all_of(data.begin(), data.end(), [](std::uint8_t b) { return b == 0xff; }),
               "unmapped port 0x%04x did not read all ones", port);
    ++unmapped_[port].first;
  }

  void write(std::uint16_t port, std::span<const std::uint8_t> data) override {
    const Route* r = route(port);
    if (r != nullptr) r->rig->before_access(r->slot, offset(*r, port));
    bool mapped = false;
    {
      Env::PhaseScope scope(env_, Phase::kGuestAccess);
      mapped = bus_.write(port, data);
    }
    FUZZ_CHECK(mapped == (r != nullptr), "bus write of port 0x%04x: mapped %d, expected %d", port,
               mapped ? 1 : 0, r != nullptr ? 1 : 0);
    if (r != nullptr) {
      r->rig->after_write(r->slot, offset(*r, port), data);
      return;
    }
    ++unmapped_[port].second;
  }

  // The port field picks the rig whose host call this is.
  void host_op(const Op& op) override { rigs_[op.port % rigs_.size()]->host_op(op); }

  void check() override {
    for (Rig* rig : rigs_) rig->check();
  }

  void finish() override {
    for (Rig* rig : rigs_) rig->finish();
    const std::vector<devices::UnmappedAccess> seen = bus_.unmapped();
    FUZZ_CHECK(seen.size() == unmapped_.size(), "bus lists %zu unmapped ports, %zu were accessed",
               seen.size(), unmapped_.size());
    for (const devices::UnmappedAccess& u : seen) {
      const auto it = unmapped_.find(u.port);
      FUZZ_CHECK(it != unmapped_.end(), "bus lists port 0x%04x as unmapped but it was not accessed",
                 u.port);
      FUZZ_CHECK(u.reads == it->second.first && u.writes == it->second.second,
                 "bus counts %llu reads / %llu writes of unmapped port 0x%04x, made %llu / %llu",
                 static_cast<unsigned long long>(u.reads),
                 static_cast<unsigned long long>(u.writes), u.port,
                 static_cast<unsigned long long>(it->second.first),
                 static_cast<unsigned long long>(it->second.second));
    }
  }

  std::uint64_t digest() const override {
    std::uint64_t d = 0;
    for (const Rig* rig : rigs_) d = d * 1'000'003 + rig->digest();
    return d;
  }

 private:
  struct Route {
    std::uint16_t port;
    std::uint16_t length;
    Rig* rig;
    std::size_t slot;
  };

  const Route* route(std::uint16_t port) const noexcept {
    for (const Route& r : routes_) {
      if (port >= r.port && port - r.port < r.length) return &r;
    }
    return nullptr;
  }
  static std::uint16_t offset(const Route& r, std::uint16_t port) noexcept {
    return static_cast<std::uint16_t>(port - r.port);
  }

  Env env_;  // first: the devices' timers live on its lists
  I8254PitRig pit_;
  Uart16550Rig uart_;
  Mc146818RtcRig rtc_;
  I8042Rig kbd_;
  DebugPortsRig debug_;
  AcpiPmRig acpi_;
  const std::array<Rig*, 6> rigs_ = {&pit_, &uart_, &rtc_, &kbd_, &debug_, &acpi_};
  devices::IoBus bus_;
  std::vector<Route> routes_;
  std::map<std::uint16_t, std::pair<std::uint64_t, std::uint64_t>> unmapped_;  // reads, writes
};

}  // namespace
}  // namespace minivmm::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  minivmm::log::set_level(minivmm::log::Level::off);  // see i8254_pit_fuzz.cc
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace minivmm::fuzz;
  run_twins(data, size, [](std::uint8_t config) { return std::make_unique<BusTarget>(config); });
  return 0;
}
