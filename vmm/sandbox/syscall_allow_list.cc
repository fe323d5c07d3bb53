#include "vmm/sandbox/syscall_allow_list.h"

#include <sys/syscall.h>

#include <stdexcept>

namespace minivmm::vmm {

SyscallAllowList& SyscallAllowList::allow(long nr) {
  if (nr == SYS_ioctl || nr == SYS_fcntl) {
    throw std::logic_error("ioctl and fcntl are allowed per request, not wholesale");
  }
  syscalls_.insert(nr);
  return *this;
}

SyscallAllowList& SyscallAllowList::allow(std::initializer_list<long> nrs) {
  for (const long nr : nrs) allow(nr);
  return *this;
}

SyscallAllowList& SyscallAllowList::allow_ioctl(int fd, unsigned long request) {
  arg_rules_.insert(ArgRule{SYS_ioctl, fd, static_cast<std::uint32_t>(request)});
  return *this;
}

SyscallAllowList& SyscallAllowList::allow_fcntl(int cmd) {
  arg_rules_.insert(ArgRule{SYS_fcntl, kAnyFd, static_cast<std::uint32_t>(cmd)});
  return *this;
}

SyscallAllowList& SyscallAllowList::allow_flock(int operation) {
  arg_rules_.insert(ArgRule{SYS_flock, kAnyFd, static_cast<std::uint32_t>(operation)});
  return *this;
}

bool SyscallAllowList::allows_with(long nr, int fd, unsigned long arg1) const noexcept {
  const auto a = static_cast<std::uint32_t>(arg1);
  return arg_rules_.count(ArgRule{nr, fd, a}) != 0 || arg_rules_.count(ArgRule{nr, kAnyFd, a}) != 0;
}

bool SyscallAllowList::allows_ioctl(int fd, unsigned long request) const noexcept {
  return allows_with(SYS_ioctl, fd, request);
}

}  // namespace minivmm::vmm
