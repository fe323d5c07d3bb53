#include "vmm/kvm/guest_ram_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <string>
#include <system_error>
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

GuestRamMapping::DropStats GuestRamMapping::drop_written_pages(std::uint64_t keep_begin,
                                                              std::uint64_t keep_end) const {
  constexpr std::uint64_t kPage = 4096;
  // pagemap: one 64-bit entry per virtual page. Bit 63 present, 62 swapped, 61 a file page or
  // shared anonymous memory. A page of a private file mapping that was written is a private
  // anonymous copy: present without bit 61, or swapped out.
  constexpr std::uint64_t kPresent = 1ull << 63, kSwapped = 1ull << 62, kFilePage = 1ull << 61;
  DropStats st;
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "/proc/self/pagemap");
  const auto base = reinterpret_cast<std::uintptr_t>(base_);
  const std::uint64_t pages = bytes_ / kPage;
  std::vector<std::uint64_t> entries(std::min<std::uint64_t>(pages, 16384));
  std::uint64_t run_start = 0, run_len = 0;
  auto flush = [&] {
    if (run_len == 0) return;
    void* at = reinterpret_cast<void*>(base + run_start * kPage);
    if (::madvise(at, run_len * kPage, MADV_DONTNEED) != 0) {
      const int err = errno;
      ::close(fd);
      throw std::system_error(err, std::generic_category(), "madvise(MADV_DONTNEED)");
    }
    st.pages_dropped += run_len;
    ++st.ranges;
    run_len = 0;
  };
  for (std::uint64_t first = 0; first < pages; first += entries.size()) {
    const std::uint64_t n = std::min<std::uint64_t>(entries.size(), pages - first);
    const off_t at = static_cast<off_t>((base / kPage + first) * sizeof(std::uint64_t));
    const ssize_t got = ::pread(fd, entries.data(), n * sizeof(std::uint64_t), at);
    if (got != static_cast<ssize_t>(n * sizeof(std::uint64_t))) {
      const int err = got < 0 ? errno : EIO;
      ::close(fd);
      throw std::system_error(err, std::generic_category(), "/proc/self/pagemap: short read");
    }
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t page = first + i;
      const std::uint64_t gpa = page * kPage;
      const std::uint64_t e = entries[i];
      const bool written = ((e & kPresent) && !(e & kFilePage)) || (e & kSwapped);
      const bool kept = gpa + kPage > keep_begin && gpa < keep_end;
      if (written && !kept) {
        if (run_len == 0) run_start = page;
        ++run_len;
      } else {
        flush();
      }
    }
    st.pages_scanned += n;
  }
  flush();
  ::close(fd);
  return st;
}

}  // namespace minivmm::vmm
