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

 private:
  void* base_ = nullptr;
  std::uint64_t bytes_ = 0;
  bool anonymous_ = true;
  devices::GuestMemory memory_;
};

}  // namespace minivmm::vmm
