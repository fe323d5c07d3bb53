// Guest physical RAM: one contiguous block from guest physical address 0, not owned (the VMM
// owns the mapping, vmm/kvm/guest_ram_mapping.h). The one view of it for the devices, the
// kernel loaders and the VMM; every access is checked against the block, overflow-safe,
// because the addresses come from the guest or from an image file.
//
// Two kinds of access, for two kinds of caller:
//  - the devices' (slice, read, write, read_obj, write_obj) never throw: a virtio device reads
//    and writes at addresses the guest chose, and a bad one means a broken queue or an error
//    status, never the VMM's end. A failed access returns false or an empty span.
//  - the loaders' (at, store, fill, store_obj, load_obj) throw std::out_of_range: a kernel
//    image that places something outside RAM is a set-up error reported to the user.
//
// Threads: the view is immutable; accesses from any thread. The guest may change the bytes at
// any time (it runs concurrently), so callers copy what they validate and use the copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace minivmm::devices {

class GuestMemory {
 public:
  GuestMemory() = default;
  explicit GuestMemory(std::span<std::byte> ram) noexcept : ram_(ram) {}

  std::uint64_t size() const noexcept { return ram_.size(); }
  std::span<std::byte> bytes() const noexcept { return ram_; }

  // True when [gpa, gpa+len) lies inside RAM; no addition that could wrap.
  bool contains(std::uint64_t gpa, std::uint64_t len) const noexcept {
    return gpa <= ram_.size() && len <= ram_.size() - gpa;
  }

  // --- The devices' accesses: never throw.

  // The bytes at [gpa, gpa+len), or an empty span when the range is not all RAM (check with
  // contains() first when len may be 0).
  std::span<std::byte> slice(std::uint64_t gpa, std::uint64_t len) const noexcept {
    if (!contains(gpa, len)) return {};
    return ram_.subspan(static_cast<std::size_t>(gpa), static_cast<std::size_t>(len));
  }

  bool read(std::uint64_t gpa, std::span<std::byte> out) const noexcept {
    if (!contains(gpa, out.size())) return false;
    if (!out.empty()) std::memcpy(out.data(), ram_.data() + gpa, out.size());
    return true;
  }
  bool write(std::uint64_t gpa, std::span<const std::byte> in) const noexcept {
    if (!contains(gpa, in.size())) return false;
    if (!in.empty()) std::memcpy(ram_.data() + gpa, in.data(), in.size());
    return true;
  }

  // Little-endian scalars and plain structs (x86 host, little-endian virtio 1.x fields).
  template <typename T>
  bool read_obj(std::uint64_t gpa, T& out) const noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    return read(gpa, std::as_writable_bytes(std::span<T, 1>(&out, 1)));
  }
  template <typename T>
  bool write_obj(std::uint64_t gpa, const T& value) const noexcept {
    static_assert(std::is_trivially_copyable_v<T>);
    return write(gpa, std::as_bytes(std::span<const T, 1>(&value, 1)));
  }

  // --- The loaders' accesses: throw std::out_of_range naming the range.

  std::span<std::byte> at(std::uint64_t gpa, std::uint64_t len) const {
    if (!contains(gpa, len)) {
      throw std::out_of_range("guest range [" + hex(gpa) + ", +" + hex(len) +
                              ") is outside guest RAM of " + hex(ram_.size()) + " bytes");
    }
    return ram_.subspan(static_cast<std::size_t>(gpa), static_cast<std::size_t>(len));
  }

  void store(std::uint64_t gpa, std::span<const std::byte> data) const {
    auto dst = at(gpa, data.size());
    if (!data.empty()) std::memcpy(dst.data(), data.data(), data.size());
  }

  void fill(std::uint64_t gpa, std::uint64_t len, std::byte value) const {
    auto dst = at(gpa, len);
    if (!dst.empty()) std::memset(dst.data(), static_cast<int>(value), dst.size());
  }

  template <typename T>
  void store_obj(std::uint64_t gpa, const T& obj) const {
    static_assert(std::is_trivially_copyable_v<T>);
    store(gpa, std::as_bytes(std::span<const T, 1>(&obj, 1)));
  }

  template <typename T>
  T load_obj(std::uint64_t gpa) const {
    static_assert(std::is_trivially_copyable_v<T>);
    T obj;
    auto src = at(gpa, sizeof(T));
    std::memcpy(&obj, src.data(), sizeof(T));
    return obj;
  }

 private:
  static std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
  }

  std::span<std::byte> ram_;
};

}  // namespace minivmm::devices
