// Guest physical RAM as devices see it: one contiguous block from guest physical address 0, not
// owned (the VMM owns the mapping). Virtio devices read and write guest memory at addresses the
// guest chose, so every access is checked against the block, overflow-safe, and reports failure
// instead of throwing: the caller decides what a bad address means (a broken queue, an error
// status), never the VMM's life.
//
// Threads: the view is immutable; accesses from any thread. The guest may change the bytes at
// any time (it runs concurrently), so callers copy what they validate and use the copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace minivmm::devices {

class GuestRam {
 public:
  GuestRam() = default;
  explicit GuestRam(std::span<std::byte> ram) noexcept : ram_(ram) {}

  std::uint64_t size() const noexcept { return ram_.size(); }

  // True when [gpa, gpa+len) lies inside RAM; no addition that could wrap.
  bool contains(std::uint64_t gpa, std::uint64_t len) const noexcept {
    return gpa <= ram_.size() && len <= ram_.size() - gpa;
  }

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

 private:
  std::span<std::byte> ram_;
};

}  // namespace minivmm::devices
