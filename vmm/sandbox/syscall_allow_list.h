// One thread's seccomp allow-list as plain data: syscall numbers allowed with any arguments,
// and syscalls allowed only with a given second argument (the ioctl request, the fcntl
// command), on a given fd or on any. Built by seccomp_allow_lists.h, turned into a filter by
// SeccompSandbox; kept apart from libseccomp so that the lists can be checked by unit tests
// without installing anything.
//
// Threads: a value type; no sharing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace minivmm::vmm {

class SyscallAllowList {
 public:
  static constexpr int kAnyFd = -1;

  // nr(fd, arg1, ...) allowed; fd kAnyFd: on every fd.
  struct ArgRule {
    long nr;
    int fd;               // kAnyFd: any
    std::uint32_t arg1;   // ioctl's request and fcntl's cmd are 32 bits to the kernel
    auto operator<=>(const ArgRule&) const = default;
  };

  // `nr` allowed with any arguments. ioctl and fcntl only through the calls below: one
  // unconditional rule would allow every request, whatever those said.
  SyscallAllowList& allow(long nr);
  SyscallAllowList& allow(std::initializer_list<long> nrs);
  // ioctl(fd, request, ...) allowed.
  SyscallAllowList& allow_ioctl(int fd, unsigned long request);
  // fcntl(any fd, cmd, ...) allowed.
  SyscallAllowList& allow_fcntl(int cmd);
  // flock(any fd, operation) allowed, for that operation only.
  SyscallAllowList& allow_flock(int operation);

  bool allows(long nr) const noexcept { return syscalls_.count(nr) != 0; }
  // As the filter decides: an exact (fd, arg1) rule or an any-fd one.
  bool allows_with(long nr, int fd, unsigned long arg1) const noexcept;
  bool allows_ioctl(int fd, unsigned long request) const noexcept;

  const std::set<long>& syscalls() const noexcept { return syscalls_; }
  const std::set<ArgRule>& arg_rules() const noexcept { return arg_rules_; }
  // Rules the filter gets: one per syscall, one per argument rule.
  std::size_t rule_count() const noexcept { return syscalls_.size() + arg_rules_.size(); }

 private:
  std::set<long> syscalls_;
  std::set<ArgRule> arg_rules_;
};

}  // namespace minivmm::vmm
