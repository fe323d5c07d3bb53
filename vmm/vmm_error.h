// Setup failures, each carrying the documented process exit code it maps to (Firecracker's
// FcExitCode). Thrown during setup only; caught once in main().
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "vmm/exit_code.h"

namespace minivmm::vmm {

class VmmError : public std::runtime_error {
 public:
  VmmError(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

// `text` as one line: every byte below 0x20 (a newline, a NUL, an escape) and 0x7f written as
// \xNN. Error messages quote what a file or a peer said (a snapshot's names, a path), and a
// script reads the first line of stderr: the message must stay that line.
inline std::string one_line(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b != 0x7f) {
      out.push_back(c);
      continue;
    }
    out += "\\x";
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

// A KVM ioctl the setup needs was refused: `what` names it, errno says why.
[[noreturn]] inline void throw_kvm_error(const char* what) {
  throw VmmError(ExitCode::kKvmUnavailable, std::string(what) + ": " + std::strerror(errno));
}

}  // namespace minivmm::vmm
