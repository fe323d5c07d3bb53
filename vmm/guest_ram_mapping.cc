#include "vmm/guest_ram_mapping.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "vmm/vmm_error.h"

namespace minivmm::vmm {

GuestRamMapping::GuestRamMapping(std::uint64_t bytes) : bytes_(bytes) {
  if (bytes == 0 || bytes % 4096 != 0 || bytes > kMaxBytes) {
    throw VmmError(ExitCode::kUsage,
                   "guest memory must be a multiple of 4 KiB between 4 KiB and 3 GiB");
  }
  base_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw VmmError(ExitCode::kHostFailure, "cannot map " + std::to_string(bytes) +
                                               " bytes of guest memory: " + std::strerror(errno));
  }
  memory_ = GuestMemory(std::span<std::byte>(static_cast<std::byte*>(base_), bytes));
}

GuestRamMapping::~GuestRamMapping() {
  if (base_) ::munmap(base_, bytes_);
}

}  // namespace minivmm::vmm
