#include "vmm/boot/boot_placement.h"

#include <algorithm>
#include <string>

#include "vmm/boot/boot_error.h"
#include "vmm/boot/boot_layout.h"

namespace minivmm::vmm {

void write_cmdline(const devices::GuestMemory& mem, std::uint64_t addr, std::string_view cmdline) {
  if (cmdline.find('\0') != std::string_view::npos) {
    throw BootError("kernel command line contains a NUL byte at offset " +
                    std::to_string(cmdline.find('\0')));
  }
  const std::uint64_t size = cmdline.size() + 1;
  if (addr >= kEbdaStart || size > kEbdaStart - addr) {
    throw BootError("kernel command line of " + std::to_string(cmdline.size()) + " bytes at " +
                        to_hex(addr) + " does not fit below the EBDA at " + to_hex(kEbdaStart),
                    BootError::Cause::kCmdlineTooLong);
  }
  mem.store(addr, std::as_bytes(std::span(cmdline.data(), cmdline.size())));
  mem.store_obj(addr + cmdline.size(), char{0});
}

std::uint64_t place_initrd_high(const devices::GuestMemory& mem, std::span<const std::byte> initrd,
                                std::uint64_t lowest, std::uint64_t limit) {
  if (initrd.empty()) return 0;
  const std::uint64_t top = std::min(limit, mem.size());
  const std::uint64_t size = initrd.size();
  if (size > top || align_down(top - size, kPageSize) < lowest) {
    throw BootError("initrd of " + to_hex(size) + " bytes does not fit between " +
                        to_hex(lowest) + " and " + to_hex(top) + " (guest RAM is " +
                        to_hex(mem.size()) + " bytes)",
                    ram_cause(lowest, size));
  }
  const std::uint64_t addr = align_down(top - size, kPageSize);
  mem.store(addr, initrd);
  return addr;
}

}  // namespace minivmm::vmm
