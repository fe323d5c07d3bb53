// Setup failures, each carrying the documented process exit code it maps to (Firecracker's
// FcExitCode). Thrown during setup only; caught once in main().
#pragma once

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

}  // namespace minivmm::vmm
