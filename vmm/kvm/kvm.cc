#include "vmm/kvm/kvm.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>

#include "vmm/vmm_error.h"

namespace minivmm::vmm {

Kvm::Kvm(const char* path) {
  fd_.reset(::open(path, O_RDWR | O_CLOEXEC));
  if (!fd_.valid()) {
    throw VmmError(ExitCode::kKvmUnavailable,
                   std::string("cannot open ") + path + ": " + std::strerror(errno));
  }
  const int version = ::ioctl(fd_.get(), KVM_GET_API_VERSION, 0);
  if (version != KVM_API_VERSION) {
    throw VmmError(ExitCode::kKvmUnavailable, "KVM API version " + std::to_string(version) +
                                                  ", expected " +
                                                  std::to_string(KVM_API_VERSION));
  }
  vcpu_mmap_size_ = ::ioctl(fd_.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  if (vcpu_mmap_size_ < static_cast<int>(sizeof(kvm_run))) {
    throw VmmError(ExitCode::kKvmUnavailable, "KVM_GET_VCPU_MMAP_SIZE failed");
  }
}

int Kvm::check_extension(long cap) const noexcept {
  const int r = ::ioctl(fd_.get(), KVM_CHECK_EXTENSION, cap);
  return r < 0 ? 0 : r;
}

void Kvm::require(long cap, std::string_view name) const {
  if (check_extension(cap) <= 0) {
    throw VmmError(ExitCode::kKvmUnavailable,
                   "KVM capability " + std::string(name) + " is missing on this host");
  }
}

namespace {

// KVM_GET_SUPPORTED_CPUID on `fd`; nullopt with errno set when KVM refused.
std::optional<std::vector<kvm_cpuid_entry2>> ask_supported_cpuid(int fd) {
  // Grow until KVM stops answering E2BIG; hosts report ~60-100 entries.
  for (std::size_t n = 128; n <= 4096; n *= 2) {
    const std::size_t bytes = kKvmCpuid2HeaderSize + n * sizeof(kvm_cpuid_entry2);
    auto buf = std::make_unique<std::byte[]>(bytes);
    auto* cpuid = reinterpret_cast<kvm_cpuid2*>(buf.get());
    cpuid->nent = static_cast<__u32>(n);
    if (::ioctl(fd, kKvmGetSupportedCpuid, cpuid) == 0) {
      // The entries start at the kernel's offset, not at g++'s `cpuid->entries` (see kvm.h).
      const auto* entries =
          reinterpret_cast<const kvm_cpuid_entry2*>(buf.get() + kKvmCpuid2HeaderSize);
      return std::vector<kvm_cpuid_entry2>(entries, entries + cpuid->nent);
    }
    if (errno != E2BIG) break;
  }
  return std::nullopt;
}

using Prefetched = std::optional<std::vector<kvm_cpuid_entry2>>;

std::mutex prefetch_mu;
std::future<Prefetched> prefetch;  // guarded by prefetch_mu; valid until taken

}  // namespace

void prefetch_supported_cpuid() {
  std::lock_guard lock(prefetch_mu);
  if (prefetch.valid()) return;
  try {
    prefetch = std::async(std::launch::async, []() -> Prefetched {
      UniqueFd fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
      if (!fd.valid()) return std::nullopt;
      return ask_supported_cpuid(fd.get());
    });
  } catch (const std::system_error&) {
    // No thread to be had: supported_cpuid() asks in line.
  }
}

std::vector<kvm_cpuid_entry2> Kvm::supported_cpuid() const {
  {
    std::unique_lock lock(prefetch_mu);
    if (prefetch.valid()) {
      std::future<Prefetched> f = std::move(prefetch);
      lock.unlock();
      if (Prefetched entries = f.get()) return std::move(*entries);
    }
  }
  if (auto entries = ask_supported_cpuid(fd_.get())) return std::move(*entries);
  throw VmmError(ExitCode::kKvmUnavailable,
                 std::string("KVM_GET_SUPPORTED_CPUID failed: ") + std::strerror(errno));
}

}  // namespace minivmm::vmm
