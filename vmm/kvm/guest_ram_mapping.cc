#include "vmm/kvm/guest_ram_mapping.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <cstdint>
#include <fstream>
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
  // The mapping's Rss from /proc/self/smaps: the pages this process has in its page tables
  // there. Not mincore(): on a file mapping (a restore) mincore looks every page up in the page
  // cache, 80 ms for a 3 GiB guest (every `stats` request paid it, and so did the first one a
  // restore benchmark waits for), and it counts the pages other clones brought into the cache.
  // A mapping split in parts (pc-testdev's page flush mprotects a page and back) is summed.
  try {
    std::ifstream in("/proc/self/smaps");
    const auto begin = reinterpret_cast<std::uintptr_t>(base_);
    const std::uintptr_t end = begin + bytes_;
    bool inside = false;
    std::uint64_t rss_kib = 0;
    for (std::string line; std::getline(in, line);) {
      const auto dash = line.find('-');
      const auto space = line.find(' ');
      if (dash != std::string::npos && space != std::string::npos && dash < space) {
        // A mapping's first line: "start-end perms ...", addresses in hex.
        const std::uintptr_t start = std::stoull(line.substr(0, dash), nullptr, 16);
        inside = start >= begin && start < end;
        continue;
      }
      if (inside && line.rfind("Rss:", 0) == 0) rss_kib += std::stoull(line.substr(4));
    }
    return rss_kib * 1024;
  } catch (...) {
    return 0;
  }
}

}  // namespace minivmm::vmm
