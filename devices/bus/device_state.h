// A device's state for a snapshot (issue 23: devices that report themselves save themselves):
// a flat binary record the device writes field by field and reads back in the same order.
// The record is input when it comes from a file, so every read is bounds-checked and a device
// checks every value it loads as it checks a guest's register write: a record that is short,
// long, or holds a value the device could never have had is refused (StateError, one line),
// and the restore is given up before the guest runs (loads go into freshly made devices).
//
// Time: records hold vm_clock instants as they were (absolute nanoseconds of vm_clock). A
// restore sets vm_clock back to the instant the snapshot was taken before any device loads, so
// a saved deadline or load time means the same there; a device re-arms its timers from them.
//
// Threads: save and load on the loop thread while the VM is paused (no vCPU runs, vm_clock is
// frozen); a device takes its own lock as for any other access.
#pragma once

#include <concepts>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace minivmm::devices {

class StateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class StateWriter {
 public:
  void u8(std::uint8_t v) { put(v); }
  void u16(std::uint16_t v) { put(v); }
  void u32(std::uint32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  void i64(std::int64_t v) { put(v); }
  void boolean(bool v) { put(static_cast<std::uint8_t>(v ? 1 : 0)); }
  // A length (u32) and the bytes.
  void bytes(std::span<const std::uint8_t> b) {
    u32(static_cast<std::uint32_t>(b.size()));
    data_.insert(data_.end(), b.begin(), b.end());
  }
  void text(std::string_view s) {
    bytes(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
  }

  const std::vector<std::uint8_t>& data() const noexcept { return data_; }

 private:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));  // little-endian x86: the file's byte order
    data_.insert(data_.end(), raw, raw + sizeof(T));
  }

  std::vector<std::uint8_t> data_;
};

class StateReader {
 public:
  // `what` names the record in errors ("uart").
  StateReader(std::span<const std::uint8_t> data, std::string what)
      : data_(data), what_(std::move(what)) {}

  std::uint8_t u8() { return get<std::uint8_t>(); }
  std::uint16_t u16() { return get<std::uint16_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  std::int64_t i64() { return get<std::int64_t>(); }
  bool boolean() {
    const std::uint8_t v = u8();
    if (v > 1) fail("a flag is " + std::to_string(v));
    return v == 1;
  }
  // At most `max` bytes: a length field may not make the reader allocate what it likes.
  std::vector<std::uint8_t> bytes(std::size_t max) {
    const std::uint32_t n = u32();
    if (n > max) fail("a field of " + std::to_string(n) + " bytes (at most " +
                      std::to_string(max) + ")");
    need(n);
    std::vector<std::uint8_t> out(data_.begin() + static_cast<std::ptrdiff_t>(pos_),
                                  data_.begin() + static_cast<std::ptrdiff_t>(pos_ + n));
    pos_ += n;
    return out;
  }
  std::string text(std::size_t max) {
    const auto b = bytes(max);
    return std::string(b.begin(), b.end());
  }
  // Exactly `out.size()` bytes, with their length checked.
  void fixed_bytes(std::span<std::uint8_t> out) {
    const std::uint32_t n = u32();
    if (n != out.size()) {
      fail("a field of " + std::to_string(n) + " bytes (expected " +
           std::to_string(out.size()) + ")");
    }
    need(n);
    std::memcpy(out.data(), data_.data() + pos_, n);
    pos_ += n;
  }

  // The record must have been read to its end: a longer one is not this device's.
  void expect_end() const {
    if (pos_ != data_.size()) {
      fail(std::to_string(data_.size() - pos_) + " bytes left over");
    }
  }
  // A value the device could never have had.
  [[noreturn]] void fail(const std::string& why) const {
    throw StateError(what_ + " state: " + why);
  }

 private:
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  void need(std::size_t n) const {
    if (n > data_.size() - pos_) fail("the record ends early");
  }

  std::span<const std::uint8_t> data_;
  std::size_t pos_ = 0;
  std::string what_;
};

// Every record starts with the version of its layout, so that a record written by another
// layout of the same device is refused by name instead of misread field by field.
inline void write_version(StateWriter& out, std::uint8_t version) { out.u8(version); }
inline void read_version(StateReader& in, std::uint8_t version) {
  const std::uint8_t got = in.u8();
  if (got != version) {
    in.fail("layout version " + std::to_string(got) + " (this build reads " +
            std::to_string(version) + ")");
  }
}

// A device whose state a snapshot holds, under state_key() (its report key, where it has one).
// save_state() may be called at any time the VM is paused; load_state() on a device freshly
// made by the same board slot, before the VM first runs.
class StatefulDevice {
 public:
  virtual ~StatefulDevice() = default;
  virtual std::string_view state_key() const noexcept = 0;
  virtual void save_state(StateWriter& out) const = 0;
  // Throws StateError: the restore is given up (a device half loaded is never run).
  virtual void load_state(StateReader& in) = 0;
};

// Snapshot participation (issue 34): every board device says how it takes part in a snapshot,
// so that a device nobody thought about is never silently skipped by the snapshot and then
// silently reset by a restore. It either is a StatefulDevice (its record), or declares
//
//   static constexpr std::string_view kStatelessBecause = "why nothing of it outlives a run";
//
// A device that does neither fails to build where the board mounts it (participation_of()),
// and a slot whose maker hands back a device with no participation fails the board's
// start-up (vmm/machine/pc_board.cc). Virtio devices state theirs through VirtioDevice's pure
// virtual save_state()/load_state() (devices/virtio/virtio_device.h).
template <typename Device>
concept StatelessDevice = requires {
  { Device::kStatelessBecause } -> std::convertible_to<std::string_view>;
};
template <typename Device>
concept SnapshotParticipant = std::derived_from<Device, StatefulDevice> || StatelessDevice<Device>;

// What one mounted device contributes to a snapshot: its records (a device may keep more than
// one, the PIT's counters and its port 0x61), or the reason it keeps none.
struct SnapshotParticipation {
  std::vector<StatefulDevice*> records;
  std::string_view stateless_because;
  bool declared() const noexcept { return !records.empty() || !stateless_because.empty(); }
};

template <typename Device>
SnapshotParticipation participation_of(Device& device) {
  static_assert(SnapshotParticipant<Device>,
                "this device declares no snapshot participation: derive from StatefulDevice "
                "(a record), or declare static constexpr std::string_view kStatelessBecause "
                "(devices/bus/device_state.h)");
  if constexpr (std::derived_from<Device, StatefulDevice>) {
    return {{&device}, {}};
  } else {
    static_assert(!std::string_view(Device::kStatelessBecause).empty(),
                  "kStatelessBecause says why the device keeps no state");
    return {{}, Device::kStatelessBecause};
  }
}

}  // namespace minivmm::devices
