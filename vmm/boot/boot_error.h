// The one exception type the kernel loaders throw. Loading happens at VM setup, so a bad
// image or an impossible placement is a user-facing setup error (STYLE.md 5.5.1): the message
// names the offending field and value on one line, and `main` reports it and exits.
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace minivmm::vmm {

class BootError : public std::runtime_error {
 public:
  // What is to blame, so that the user is told what to change (issue 20: a guest RAM too small
  // for a good kernel was reported as a bad image).
  enum class Cause {
    kImage,        // the file: bad magic, fields, offsets, a placement no RAM size allows
    kRamTooSmall,  // a good image that needs more guest RAM than --memory gives
    kCmdlineTooLong,  // the command line does not fit what the kernel or the layout takes
  };

  explicit BootError(const std::string& what, Cause cause = Cause::kImage)
      : std::runtime_error(what), cause_(cause) {}
  Cause cause() const noexcept { return cause_; }

 private:
  Cause cause_;
};

// A range [start, start + size) that is not in guest RAM: a good image wants more RAM if the
// largest RAM minivmm gives (kMaxRamSize in boot_layout.h, 3 GiB) would hold it; else the image
// asks for the impossible.
inline BootError::Cause ram_cause(std::uint64_t start, std::uint64_t size) noexcept {
  constexpr std::uint64_t kLargestRam = 0xc0000000;
  return start <= kLargestRam && size <= kLargestRam - start ? BootError::Cause::kRamTooSmall
                                                             : BootError::Cause::kImage;
}

// "0x1f00": addresses and header fields read best in hex in error messages.
inline std::string to_hex(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace minivmm::vmm
