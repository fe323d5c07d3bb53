// How a fuzz input reaches the devices.
//
// A Rig owns one device (or a pair that belongs together, like the PIT and port 0x61) with its
// fakes and the checks for it: it lists its port ranges as Slots and is told about every access
// before and after it happens, so the same checks run whether the access came straight from the
// fuzzer (DeviceTarget) or through an IoBus (the bus target).
//
// Every input runs on two identical targets ("twins") side by side. A read fills the first
// twin's buffer with 0x00 and the second's with 0xff beforehand; the devices are deterministic
// (all clocks are fakes), so any byte that differs between the twins was never written by the
// device. That is how "reads fill every byte" is checked without MemorySanitizer, and it catches
// nondeterminism (uninitialised state) on the way.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "devices/log/log.h"
#include "devices/bus/port_io_device.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_env.h"
#include "tests/fuzz/fuzz_ops.h"

namespace minivmm::fuzz {

class Rig {
 public:
  struct Slot {
    devices::PortIoDevice* device;
    std::uint16_t length;
    std::optional<std::uint16_t> pc_port;  // where a PC decodes it; nullopt: not on the bus
  };

  virtual ~Rig() = default;

  virtual std::span<const Slot> slots() const noexcept = 0;

  virtual void before_access(std::size_t /*slot*/, std::uint16_t /*offset*/) {}
  virtual void after_read(std::size_t /*slot*/, std::uint16_t /*offset*/,
                          std::span<const std::uint8_t> /*data*/) {}
  virtual void after_write(std::size_t /*slot*/, std::uint16_t /*offset*/,
                           std::span<const std::uint8_t> /*data*/) {}
  // OpKind::kHost: a call from the VMM side (UART input, IRQ coalescing, a wall clock step).
  virtual void host_op(const Op& /*op*/) {}
  // After every record, and once at the end of the input.
  virtual void check() {}
  virtual void finish() {}
  // Observable outcome so far (IRQ and output counters); the twins must agree on it.
  virtual std::uint64_t digest() const = 0;
};

class Target {
 public:
  virtual ~Target() = default;
  virtual Env& env() noexcept = 0;
  virtual void read(std::uint16_t port, std::span<std::uint8_t> data) = 0;
  virtual void write(std::uint16_t port, std::span<const std::uint8_t> data) = 0;
  virtual void host_op(const Op& op) = 0;
  virtual void check() = 0;
  virtual void finish() = 0;
  virtual std::uint64_t digest() const = 0;
};

// One rig, its slots laid end to end: port % (sum of the slot lengths) picks slot and offset.
template <typename R>
class DeviceTarget final : public Target {
 public:
  explicit DeviceTarget(std::uint8_t config) : rig_(env_, config) {
    for (const Rig::Slot& s : rig_.slots()) ports_ += s.length;
  }

  Env& env() noexcept override { return env_; }

  void read(std::uint16_t port, std::span<std::uint8_t> data) override {
    const auto [slot, offset] = locate(port);
    rig_.before_access(slot, offset);
    {
      Env::PhaseScope scope(env_, Phase::kGuestAccess);
      rig_.slots()[slot].device->read(offset, data);
    }
    rig_.after_read(slot, offset, data);
  }

  void write(std::uint16_t port, std::span<const std::uint8_t> data) override {
    const auto [slot, offset] = locate(port);
    rig_.before_access(slot, offset);
    {
      Env::PhaseScope scope(env_, Phase::kGuestAccess);
      rig_.slots()[slot].device->write(offset, data);
    }
    rig_.after_write(slot, offset, data);
  }

  void host_op(const Op& op) override { rig_.host_op(op); }
  void check() override { rig_.check(); }
  void finish() override { rig_.finish(); }
  std::uint64_t digest() const override { return rig_.digest(); }

 private:
  struct Location {
    std::size_t slot;
    std::uint16_t offset;
  };
  Location locate(std::uint16_t port) const noexcept {
    unsigned p = port % ports_;
    const auto slots = rig_.slots();
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (p < slots[i].length) return {i, static_cast<std::uint16_t>(p)};
      p -= slots[i].length;
    }
    return {0, 0};  // unreachable: p < ports_
  }

  Env env_;  // first: the rig's timers live on its lists
  R rig_;
  unsigned ports_ = 0;
};

// Runs one input on twin targets built by `make(config)`, checking after every record.
template <typename Make>
void run_twins(const std::uint8_t* data, std::size_t size, Make make) {
  OpReader in(data, size);
  const std::unique_ptr<Target> a = make(in.config());
  const std::unique_ptr<Target> b = make(in.config());
  while (const std::optional<Op> op = in.next()) {
    bool more = true;
    switch (op->kind) {
      case OpKind::kRead: {
        std::array<std::uint8_t, 4> x{};
        std::array<std::uint8_t, 4> y{};
        y.fill(0xff);
        const std::size_t w = op->width();
        a->read(op->port, std::span(x).first(w));
        b->read(op->port, std::span(y).first(w));
        for (std::size_t i = 0; i < w; ++i) {
          FUZZ_CHECK(x[i] == y[i],
                     "read of port 0x%04x width %zu: byte %zu was not filled (twins read 0x%02x "
                     "and 0x%02x)",
                     op->port, w, i, x[i], y[i]);
        }
        break;
      }
      case OpKind::kWrite: {
        const auto bytes = op->value_bytes();
        const auto w = op->width();
        a->write(op->port, std::span(bytes).first(w));
        b->write(op->port, std::span(bytes).first(w));
        break;
      }
      case OpKind::kAdvance:
        more = a->env().advance(op->delta());
        more = b->env().advance(op->delta()) && more;
        break;
      case OpKind::kAdvanceLate:
        more = a->env().advance_late(op->delta());
        more = b->env().advance_late(op->delta()) && more;
        break;
      case OpKind::kHost:
        a->host_op(*op);
        b->host_op(*op);
        break;
      case OpKind::kPauseResume:
        a->env().toggle_pause();
        b->env().toggle_pause();
        break;
    }
    a->check();
    b->check();
    FUZZ_CHECK(a->digest() == b->digest(), "identical twins diverged (nondeterministic device)");
    if (!more) break;
  }
  a->finish();
  b->finish();
  FUZZ_CHECK(a->digest() == b->digest(), "identical twins diverged (nondeterministic device)");
}

}  // namespace minivmm::fuzz

// Defines the libFuzzer entry points for one device rig: logging off (formatting guest-error
// logs costs more than the device call they report), then each input runs on identical twins.
#define MINIVMM_DEVICE_FUZZ_TARGET(Rig)                                                  \
  extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {                \
    ::minivmm::log::set_level(::minivmm::log::Level::off);                               \
    return 0;                                                                            \
  }                                                                                      \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {   \
    ::minivmm::fuzz::run_twins(data, size, [](std::uint8_t config) {                     \
      return std::make_unique<::minivmm::fuzz::DeviceTarget<::minivmm::fuzz::Rig>>(config); \
    });                                                                                  \
    return 0;                                                                            \
  }
