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
  explicit BootError(const std::string& what) : std::runtime_error(what) {}
};

// "0x1f00": addresses and header fields read best in hex in error messages.
inline std::string to_hex(std::uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(value));
  return buf;
}

}  // namespace minivmm::vmm
