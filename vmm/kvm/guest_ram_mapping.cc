#include "vmm/kvm/guest_ram_mapping.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

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
  memory_ = devices::GuestMemory(std::span<std::byte>(static_cast<std::byte*>(base_), bytes));
}

GuestRamMapping::GuestRamMapping(int fd, std::uint64_t offset, std::uint64_t bytes)
    : bytes_(bytes), anonymous_(false) {
  if (bytes == 0 || bytes % 4096 != 0 || bytes > kMaxBytes || offset % 4096 != 0) {
    throw VmmError(ExitCode::kBadKernel, "guest memory of " + std::to_string(bytes) +
                                             " bytes at offset " + std::to_string(offset));
  }
  // MAP_NORESERVE as for fresh RAM: the pages a clone writes are committed as it writes them.
  base_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd,
                 static_cast<off_t>(offset));
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw VmmError(ExitCode::kHostFailure, "cannot map the snapshot's " + std::to_string(bytes) +
                                               " bytes of guest memory: " + std::strerror(errno));
  }
  memory_ = devices::GuestMemory(std::span<std::byte>(static_cast<std::byte*>(base_), bytes));
}

GuestRamMapping::~GuestRamMapping() {
  if (base_) ::munmap(base_, bytes_);
}

std::uint64_t GuestRamMapping::resident_bytes() const noexcept {
  constexpr std::uint64_t kPage = 4096;
  const std::uint64_t pages = bytes_ / kPage;
  // One byte per page: 768 KiB for the largest (3 GiB) guest, for a call made once per run.
  std::vector<unsigned char> vec;
  try {
    vec.resize(pages);
  } catch (...) {
    return 0;
  }
  if (::mincore(base_, bytes_, vec.data()) != 0) return 0;
  std::uint64_t resident = 0;
  for (const unsigned char v : vec) resident += v & 1;
  return resident * kPage;
}

}  // namespace minivmm::vmm
