// The guest's RAM: one anonymous mapping, guest physical 0 upwards, and its owner (the views are
// devices::GuestMemory for the loaders and devices::GuestMemory for the devices). Owned apart from the Vm so
// the kernel and initrd can be loaded (and rejected) before /dev/kvm is opened: a bad image gets
// its own error on any machine, and nothing of KVM is set up for an input that cannot boot.
#pragma once

#include <cstdint>

#include "devices/bus/guest_memory.h"

namespace minivmm::vmm {

class GuestRamMapping {
 public:
  static constexpr std::uint64_t kMaxBytes = 3ull << 30;  // below the 32-bit MMIO hole

  // Maps `bytes` (a multiple of 4 KiB, 4 KiB..3 GiB: VmmError(kUsage) otherwise) lazily:
  // MAP_NORESERVE, so untouched guest RAM costs the host nothing. VmmError(kHostFailure) when
  // the host refuses the mapping.
  explicit GuestRamMapping(std::uint64_t bytes);
  // A restored guest's RAM: `bytes` of `fd` from `offset` (4 KiB aligned), mapped MAP_PRIVATE, so
  // a page loads from the file when the guest first touches it, and every clone restored from
  // the same file shares the pages it has not written (copy-on-write). VmmError(kHostFailure)
  // when the host refuses the mapping.
  GuestRamMapping(int fd, std::uint64_t offset, std::uint64_t bytes);
  ~GuestRamMapping();
  GuestRamMapping(const GuestRamMapping&) = delete;
  GuestRamMapping& operator=(const GuestRamMapping&) = delete;

  devices::GuestMemory memory() const noexcept { return memory_; }

  // How much of the mapping this process has resident (its Rss in /proc/self/smaps): the guest
  // RAM share of the process's RSS, so that the report can tell the VMM's own memory apart from
  // the guest's. 0 when /proc cannot be read.
  std::uint64_t resident_bytes() const noexcept;
  // An anonymous mapping: a page the host never backed reads as zeros (a snapshot skips it).
  bool anonymous() const noexcept { return anonymous_; }

  // A reset in place ({"cmd":"reset"}) of a file mapping: every page written since the mapping
  // was made — the guest's writes and the VMM's (a virtio completion, a loader) alike, as each
  // made a private copy — goes back to the file's, but those in [keep_begin, keep_end) (guest
  // physical, the mailbox). Which pages were written comes from /proc/self/pagemap (present and
  // not a file page, or swapped out); each run of them is dropped with MADV_DONTNEED, after
  // which the page reads from the file again. Throws std::system_error if /proc or madvise
  // refuses.
  //
  // Where the host has the PAGEMAP_SCAN ioctl (Linux 6.7), the kernel walks the page tables and
  // hands back only the written ranges, skipping every page table the guest never touched: the
  // cost follows what was written, not the guest's size (a pread of the whole map reads 8 bytes
  // per page, 6 MiB for 3 GiB). Elsewhere the pread scan, which gives the same answer.
  struct DropStats {
    std::uint64_t pages_scanned = 0;
    std::uint64_t pages_dropped = 0;
    std::uint64_t ranges = 0;  // madvise calls
    bool scan_ioctl = false;   // found by PAGEMAP_SCAN (else by reading the map)
  };
  enum class Scan { kAuto, kIoctl, kRead };  // kIoctl: fail where the host lacks it (tests)
  DropStats drop_written_pages(std::uint64_t keep_begin, std::uint64_t keep_end,
                               Scan how = Scan::kAuto) const;
  // /proc/self/pagemap, opened with a file mapping (a restore) so the reset's seccomp list can
  // allow its ioctl on this one descriptor; -1 for anonymous RAM.
  int pagemap_fd() const noexcept { return pagemap_fd_; }
  static unsigned long pagemap_scan_request() noexcept;  // for the seccomp list

 private:
  void* base_ = nullptr;
  std::uint64_t bytes_ = 0;
  bool anonymous_ = true;
  int pagemap_fd_ = -1;
  devices::GuestMemory memory_;

  DropStats drop_by_read(std::uint64_t keep_begin, std::uint64_t keep_end) const;
  // false: the host has no PAGEMAP_SCAN (nothing was dropped).
  bool drop_by_scan(std::uint64_t keep_begin, std::uint64_t keep_end, DropStats& st) const;
  void drop_range(std::uint64_t first_page, std::uint64_t pages, std::uint64_t keep_begin,
                  std::uint64_t keep_end, DropStats& st) const;
};

}  // namespace minivmm::vmm
