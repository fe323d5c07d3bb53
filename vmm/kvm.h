// The /dev/kvm system fd: API version, capabilities, supported CPUID, vCPU mmap size.
#pragma once

#include <linux/kvm.h>

#include <memory>
#include <string_view>
#include <vector>

#include "vmm/unique_fd.h"

namespace minivmm::vmm {

// The ioctl numbers of the two CPUID calls encode sizeof(struct kvm_cpuid2), which is 8 in C but
// 12 when g++ compiles the header (its zero-length entries[] array of 40-byte, 4-aligned
// structs is laid out differently), and KVM rejects the mismatch with EINVAL. Spell them out with
// the kernel's size.
inline constexpr unsigned long kKvmCpuid2HeaderSize = 8;
inline constexpr unsigned long kKvmGetSupportedCpuid =
    _IOC(_IOC_READ | _IOC_WRITE, KVMIO, 0x05, kKvmCpuid2HeaderSize);
inline constexpr unsigned long kKvmSetCpuid2 = _IOC(_IOC_WRITE, KVMIO, 0x90, kKvmCpuid2HeaderSize);

class Kvm {
 public:
  // Opens `path`; throws VmmError(kKvmUnavailable) naming the reason.
  explicit Kvm(const char* path = "/dev/kvm");

  int fd() const noexcept { return fd_.get(); }
  int check_extension(long cap) const noexcept;
  // Throws VmmError(kKvmUnavailable) "KVM capability KVM_CAP_X is missing" if absent.
  void require(long cap, std::string_view name) const;
  int vcpu_mmap_size() const noexcept { return vcpu_mmap_size_; }

  // KVM_GET_SUPPORTED_CPUID, as entries.
  std::vector<kvm_cpuid_entry2> supported_cpuid() const;

 private:
  UniqueFd fd_;
  int vcpu_mmap_size_ = 0;
};

}  // namespace minivmm::vmm
