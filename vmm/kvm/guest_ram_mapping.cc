#include "vmm/kvm/guest_ram_mapping.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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
  // Only a file mapping can be reset; -1 (no /proc) leaves the reset to say so itself.
  pagemap_fd_ = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
}

GuestRamMapping::~GuestRamMapping() {
  if (base_) ::munmap(base_, bytes_);
  if (pagemap_fd_ >= 0) ::close(pagemap_fd_);
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

namespace {

constexpr std::uint64_t kRamPage = 4096;

// PAGEMAP_SCAN (Linux 6.7, include/uapi/linux/fs.h): Debian 12's headers predate it, so its ABI
// is spelled out here. A region matches when ((categories ^ inverted) & mask) == mask and, with
// an anyof mask, (categories ^ inverted) & anyof != 0.
struct PmScanArg {
  std::uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  std::uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
struct PageRegion {
  std::uint64_t start, end, categories;
};
constexpr std::uint64_t kPageIsFile = 1u << 2, kPageIsPresent = 1u << 3, kPageIsSwapped = 1u << 4;
constexpr unsigned long kPagemapScan = _IOWR('f', 16, PmScanArg);
static_assert(sizeof(PmScanArg) == 96 && sizeof(PageRegion) == 24);

}  // namespace

unsigned long GuestRamMapping::pagemap_scan_request() noexcept { return kPagemapScan; }

void GuestRamMapping::drop_range(std::uint64_t first_page, std::uint64_t pages,
                                 std::uint64_t keep_begin, std::uint64_t keep_end,
                                 DropStats& st) const {
  const auto base = reinterpret_cast<std::uintptr_t>(base_);
  auto drop = [&](std::uint64_t from, std::uint64_t to) {  // guest physical, page aligned
    if (from >= to) return;
    if (::madvise(reinterpret_cast<void*>(base + from), to - from, MADV_DONTNEED) != 0) {
      throw std::system_error(errno, std::generic_category(), "madvise(MADV_DONTNEED)");
    }
    st.pages_dropped += (to - from) / kRamPage;
    ++st.ranges;
  };
  const std::uint64_t begin = first_page * kRamPage, end = begin + pages * kRamPage;
  // The mailbox's pages stay: a page that overlaps it at all is kept whole.
  const std::uint64_t kb = keep_begin / kRamPage * kRamPage;
  const std::uint64_t ke = keep_end <= keep_begin ? kb : (keep_end + kRamPage - 1) / kRamPage * kRamPage;
  if (ke <= begin || kb >= end || ke == kb) {
    drop(begin, end);
    return;
  }
  drop(begin, std::max(begin, kb));
  drop(std::min(end, ke), end);
}

GuestRamMapping::DropStats GuestRamMapping::drop_written_pages(std::uint64_t keep_begin,
                                                              std::uint64_t keep_end,
                                                              Scan how) const {
  DropStats st;
  if (how != Scan::kRead) {
    if (drop_by_scan(keep_begin, keep_end, st)) return st;
    if (how == Scan::kIoctl) {
      throw std::system_error(ENOTTY, std::generic_category(), "PAGEMAP_SCAN");
    }
  }
  return drop_by_read(keep_begin, keep_end);
}

bool GuestRamMapping::drop_by_scan(std::uint64_t keep_begin, std::uint64_t keep_end,
                                   DropStats& st) const {
  if (pagemap_fd_ < 0) return false;
  const auto base = reinterpret_cast<std::uintptr_t>(base_);
  // Written: not a file page, and present or swapped out (a written page of a private file
  // mapping is an anonymous copy). A page the guest never touched has no categories at all.
  std::array<PageRegion, 256> regions;
  std::uint64_t at = base;
  const std::uint64_t end = base + bytes_;
  while (at < end) {
    PmScanArg arg{};
    arg.size = sizeof arg;
    arg.start = at;
    arg.end = end;
    arg.vec = reinterpret_cast<std::uintptr_t>(regions.data());
    arg.vec_len = regions.size();
    arg.category_inverted = kPageIsFile;
    arg.category_mask = kPageIsFile;
    arg.category_anyof_mask = kPageIsPresent | kPageIsSwapped;
    arg.return_mask = kPageIsFile | kPageIsPresent | kPageIsSwapped;
    const int n = ::ioctl(pagemap_fd_, kPagemapScan, &arg);
    if (n < 0) {
      // ENOTTY/EINVAL: an older kernel; the first call tells, before anything was dropped.
      if ((errno == ENOTTY || errno == EINVAL) && at == base) return false;
      throw std::system_error(errno, std::generic_category(), "ioctl(PAGEMAP_SCAN)");
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
      const std::uint64_t first = (regions[i].start - base) / kRamPage;
      drop_range(first, (regions[i].end - regions[i].start) / kRamPage, keep_begin, keep_end, st);
    }
    // walk_end: where the walk stopped, the end when it saw everything.
    if (arg.walk_end <= at) {
      throw std::system_error(EIO, std::generic_category(), "ioctl(PAGEMAP_SCAN) made no progress");
    }
    at = arg.walk_end;
  }
  st.pages_scanned = bytes_ / kRamPage;
  st.scan_ioctl = true;
  return true;
}

GuestRamMapping::DropStats GuestRamMapping::drop_by_read(std::uint64_t keep_begin,
                                                        std::uint64_t keep_end) const {
  // pagemap: one 64-bit entry per virtual page. Bit 63 present, 62 swapped, 61 a file page or
  // shared anonymous memory. A page of a private file mapping that was written is a private
  // anonymous copy: present without bit 61, or swapped out.
  constexpr std::uint64_t kPresent = 1ull << 63, kSwapped = 1ull << 62, kFilePage = 1ull << 61;
  DropStats st;
  const int own = pagemap_fd_ < 0 ? ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
  const int fd = pagemap_fd_ < 0 ? own : pagemap_fd_;
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "/proc/self/pagemap");
  struct Closer {
    int fd;
    ~Closer() { if (fd >= 0) ::close(fd); }
  } closer{own};
  const auto base = reinterpret_cast<std::uintptr_t>(base_);
  const std::uint64_t pages = bytes_ / kRamPage;
  std::vector<std::uint64_t> entries(std::min<std::uint64_t>(pages, 16384));
  std::uint64_t run_start = 0, run_len = 0;
  auto flush = [&] {
    if (run_len == 0) return;
    drop_range(run_start, run_len, keep_begin, keep_end, st);
    run_len = 0;
  };
  for (std::uint64_t first = 0; first < pages; first += entries.size()) {
    const std::uint64_t n = std::min<std::uint64_t>(entries.size(), pages - first);
    const off_t at = static_cast<off_t>((base / kRamPage + first) * sizeof(std::uint64_t));
    const ssize_t got = ::pread(fd, entries.data(), n * sizeof(std::uint64_t), at);
    if (got != static_cast<ssize_t>(n * sizeof(std::uint64_t))) {
      throw std::system_error(got < 0 ? errno : EIO, std::generic_category(),
                              "/proc/self/pagemap: short read");
    }
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t e = entries[i];
      const bool written = ((e & kPresent) && !(e & kFilePage)) || (e & kSwapped);
      if (written) {
        if (run_len == 0) run_start = first + i;
        ++run_len;
      } else {
        flush();
      }
    }
    st.pages_scanned += n;
  }
  flush();
  return st;
}

}  // namespace minivmm::vmm
