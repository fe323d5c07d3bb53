// Guest physical memory as seen by the VMM: one contiguous RAM block starting at guest
// physical address 0. A non-owning view; `Vm` owns the mmap. Every access is bounds-checked
// because addresses often come from guest-controlled or image-controlled values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace minivmm::vmm {

class GuestMemory {
 public:
  GuestMemory() = default;
  explicit GuestMemory(std::span<std::byte> ram) : ram_(ram) {}

  std::uint64_t size() const noexcept { return ram_.size(); }
  std::span<std::byte> bytes() const noexcept { return ram_; }

  // True when [gpa, gpa+len) lies inside RAM; overflow-safe.
  bool contains(std::uint64_t gpa, std::uint64_t len) const noexcept {
    return gpa <= ram_.size() && len <= ram_.size() - gpa;
  }

  // The bytes at [gpa, gpa+len). Throws std::out_of_range: callers are loaders, whose
  // failures are setup errors reported to the user.
  std::span<std::byte> slice(std::uint64_t gpa, std::uint64_t len) const {
    if (!contains(gpa, len)) {
      throw std::out_of_range("guest range [" + hex(gpa) + ", +" + hex(len) +
                              ") is outside guest RAM of " + hex(ram_.size()) + " bytes");
    }
    return ram_.subspan(static_cast<std::size_t>(gpa), static_cast<std::size_t>(len));
  }

  void write(std::uint64_t gpa, std::span<const std::byte> data) const {
    auto dst = slice(gpa, data.size());
    if (!data.empty()) std::memcpy(dst.data(), data.data(), data.size());
  }

  void fill(std::uint64_t gpa, std::uint64_t len, std::byte value) const {
    auto dst = slice(gpa, len);
    if (!dst.empty()) std::memset(dst.data(), static_cast<int>(value), dst.size());
  }

  template <typename T>
  void write_obj(std::uint64_t gpa, const T& obj) const {
    static_assert(std::is_trivially_copyable_v<T>);
    write(gpa, std::as_bytes(std::span<const T, 1>(&obj, 1)));
  }

  template <typename T>
  T read_obj(std::uint64_t gpa) const {
    static_assert(std::is_trivially_copyable_v<T>);
    T obj;
    auto src = slice(gpa, sizeof(T));
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

}  // namespace minivmm::vmm
