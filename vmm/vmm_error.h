// Setup failures, each carrying the documented process exit code it maps to (Firecracker's
// FcExitCode). Thrown during setup only; caught once in main().
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "vmm/exit_code.h"

namespace minivmm::vmm {

class VmmError : public std::runtime_error {
 public:
  VmmError(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

// A KVM ioctl the setup needs was refused: `what` names it, errno says why.
[[noreturn]] inline void throw_kvm_error(const char* what) {
  throw VmmError(ExitCode::kKvmUnavailable, std::string(what) + ": " + std::strerror(errno));
}

}  // namespace minivmm::vmm
