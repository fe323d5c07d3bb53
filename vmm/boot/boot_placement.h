// Placing the loader-provided blobs (command line, initrd) in guest RAM, with the checks every
// boot path needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

// Writes `cmdline` NUL-terminated at `addr`. Throws BootError if it contains a NUL (the kernel
// would silently drop the rest) or would run into the EBDA at kEbdaStart.
void write_cmdline(const devices::GuestMemory& mem, std::uint64_t addr, std::string_view cmdline);

// Writes `initrd` page-aligned as high as possible so that it ends at or below
// min(`limit`, RAM size) and starts at or above `lowest`, and returns its address. Boot loaders
// put the initrd high so the kernel's decompression area below it stays free. Throws BootError
// when it does not fit. An empty initrd is not placed; the result is then 0.
std::uint64_t place_initrd_high(const devices::GuestMemory& mem, std::span<const std::byte> initrd,
                                std::uint64_t lowest, std::uint64_t limit);

constexpr std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}
constexpr std::uint64_t align_down(std::uint64_t value, std::uint64_t alignment) {
  return value & ~(alignment - 1);
}

}  // namespace minivmm::vmm
