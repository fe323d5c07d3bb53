// The /dev/kvm system fd: API version, capabilities, supported CPUID, vCPU mmap size.
#pragma once

#include <linux/kvm.h>

#include <memory>
#include <string_view>
#include <vector>

#include "vmm/kvm/unique_fd.h"

namespace minivmm::vmm {

// The ioctl numbers of the CPUID and MSR calls encode sizeof(struct kvm_cpuid2/kvm_msrs),
// which is 8 in C but 12 in C++: the uapi __DECLARE_FLEX_ARRAY macro wraps the array in a
// struct with an empty member, and an empty struct has size 1 in C++. KVM rejects the mismatch
// with EINVAL, so spell the numbers out with the kernel's size. For the same reason g++ places
// `entries` at offset 12 (kvm_msrs: 16) where the kernel reads offset 8: never use the member,
// address the entries at kKvmCpuid2HeaderSize from the start of the buffer.
inline constexpr unsigned long kKvmCpuid2HeaderSize = 8;
inline constexpr unsigned long kKvmGetSupportedCpuid =
    _IOC(_IOC_READ | _IOC_WRITE, KVMIO, 0x05, kKvmCpuid2HeaderSize);
inline constexpr unsigned long kKvmSetCpuid2 = _IOC(_IOC_WRITE, KVMIO, 0x90, kKvmCpuid2HeaderSize);
// struct kvm_msrs has the same flex-array header (nmsrs, pad).
inline constexpr unsigned long kKvmSetMsrs = _IOC(_IOC_WRITE, KVMIO, 0x89, kKvmCpuid2HeaderSize);
// struct kvm_signal_mask is {u32 len; u8 sigset[]}: 4 bytes to the kernel, 8 to g++ (the same
// flexible-array wrapper), and the size is part of the ioctl number, so spell it out; the
// kernel reads the sigset right after len, at offset 4.
// struct kvm_xsave ends in a flexible array that the uapi header declares with an empty struct
// beside it, which is 1 byte in C++ (0 in C): sizeof is 4100 here, KVM's ioctl numbers carry
// 4096, and KVM answers a number it does not know with EINVAL.
inline constexpr unsigned long kKvmXsaveSize = 4096;
inline constexpr unsigned long kKvmGetXsave = _IOC(_IOC_READ, KVMIO, 0xa4, kKvmXsaveSize);
inline constexpr unsigned long kKvmSetXsave = _IOC(_IOC_WRITE, KVMIO, 0xa5, kKvmXsaveSize);
inline constexpr unsigned long kKvmGetXsave2 = _IOC(_IOC_READ, KVMIO, 0xcf, kKvmXsaveSize);
inline constexpr unsigned long kKvmGetMsrs = _IOC(_IOC_READ | _IOC_WRITE, KVMIO, 0x88, kKvmCpuid2HeaderSize);
inline constexpr unsigned long kKvmSignalMaskHeaderSize = 4;
inline constexpr unsigned long kKvmSetSignalMask =
    _IOC(_IOC_WRITE, KVMIO, 0x8b, kKvmSignalMaskHeaderSize);

class Kvm {
 public:
  // Opens `path`; throws VmmError(kKvmUnavailable) naming the reason.
  explicit Kvm(const char* path = "/dev/kvm");

  int fd() const noexcept { return fd_.get(); }
  int check_extension(long cap) const noexcept;
  // Throws VmmError(kKvmUnavailable) "KVM capability KVM_CAP_X is missing" if absent.
  void require(long cap, std::string_view name) const;
  int vcpu_mmap_size() const noexcept { return vcpu_mmap_size_; }

  // KVM_GET_SUPPORTED_CPUID, as entries: the prefetched answer when prefetch_supported_cpuid()
  // was called and it got one, else asked now.
  std::vector<kvm_cpuid_entry2> supported_cpuid() const;

 private:
  UniqueFd fd_;
  int vcpu_mmap_size_ = 0;
};

// Asks KVM_GET_SUPPORTED_CPUID on a thread of its own, on its own /dev/kvm descriptor (a system
// ioctl: any descriptor gets the same answer), for the next Kvm::supported_cpuid() to take. On
// this project's hosts the ioctl took 0.65 ms (KVM runs CPUID for every leaf, and each is an
// exit to the hypervisor beneath), a tenth of a restore; started before the run's set-up (the
// snapshot file, the loop, the control socket, the VM and its memory), it is answered by the
// time the vCPUs are made. Call it once, before any thread is sandboxed; a failure leaves
// supported_cpuid() to ask (and say why) itself.
void prefetch_supported_cpuid();

}  // namespace minivmm::vmm
