// Guest RAM for loader tests: an anonymous mapping, so a "2 GiB guest" costs only the pages a
// test touches, plus helpers shared by the boot tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/boot/boot_error.h"
#include "devices/bus/guest_memory.h"

namespace minivmm::vmm::testing {

class TestRam {
 public:
  explicit TestRam(std::uint64_t size) : size_(size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of test RAM failed");
    base_ = static_cast<std::byte*>(p);
  }
  ~TestRam() { munmap(base_, size_); }
  TestRam(const TestRam&) = delete;
  TestRam& operator=(const TestRam&) = delete;

  devices::GuestMemory mem() const { return devices::GuestMemory(std::span<std::byte>(base_, size_)); }

  template <typename T>
  T read(std::uint64_t gpa) const {
    return mem().load_obj<T>(gpa);
  }
  std::vector<std::byte> bytes(std::uint64_t gpa, std::uint64_t len) const {
    auto s = mem().at(gpa, len);
    return {s.begin(), s.end()};
  }

 private:
  std::byte* base_ = nullptr;
  std::uint64_t size_;
};

inline constexpr std::uint64_t kMiB = 1ull << 20;
inline constexpr std::uint64_t kGiB = 1ull << 30;

// Passes when `f` throws BootError whose message contains `needle`.
template <typename F>
::testing::AssertionResult throws_boot_error(F&& f, std::string_view needle) {
  try {
    f();
  } catch (const BootError& e) {
    const std::string_view what = e.what();
    if (what.find(needle) != std::string_view::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "BootError \"" << what << "\" does not mention \"" << needle << "\"";
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-BootError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw (expected \"" << needle << "\")";
}

// Little-endian stores into a byte vector, for building synthetic images.
template <typename T>
void put(std::vector<std::byte>& buf, std::size_t offset, T value) {
  if (buf.size() < offset + sizeof value) buf.resize(offset + sizeof value);
  std::memcpy(buf.data() + offset, &value, sizeof value);
}

inline std::vector<std::byte> pattern_bytes(std::size_t size, std::uint8_t seed) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i) {
    out[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
  }
  return out;
}

inline std::span<const std::byte> as_span(const std::vector<std::byte>& v) { return v; }

}  // namespace minivmm::vmm::testing
