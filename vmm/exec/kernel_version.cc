#include "vmm/exec/kernel_version.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace minivmm::vmm::exec {
namespace {

constexpr std::size_t kMaxRelease = 64;

std::optional<std::string> first_word(std::span<const std::uint8_t> bytes, std::string& why) {
  std::string out;
  for (const std::uint8_t b : bytes) {
    if (b == 0 || b == ' ') break;
    if (b < 0x21 || b > 0x7e || b == '/') {
      why = "the version string has a byte a folder name cannot hold";
      return std::nullopt;
    }
    if (out.size() == kMaxRelease) {
      why = "the version string is longer than " + std::to_string(kMaxRelease) + " bytes";
      return std::nullopt;
    }
    out.push_back(static_cast<char>(b));
  }
  if (out.empty() || out == "." || out == "..") {
    why = "the version string is empty";
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> from_bzimage(std::span<const std::uint8_t> image, std::string& why) {
  std::uint16_t protocol = 0, pointer = 0;
  std::memcpy(&protocol, image.data() + 0x206, 2);
  std::memcpy(&pointer, image.data() + 0x20e, 2);
  if (protocol < 0x0200 || pointer == 0) {
    why = "the bzImage's setup header has no kernel_version";
    return std::nullopt;
  }
  const std::size_t at = std::size_t{pointer} + 0x200;
  if (at >= image.size()) {
    why = "the bzImage's kernel_version points past the end of the file";
    return std::nullopt;
  }
  return first_word(image.subspan(at, std::min<std::size_t>(image.size() - at, 256)), why);
}

std::optional<std::string> from_elf(std::span<const std::uint8_t> image, std::string& why) {
  static constexpr std::string_view kBanner = "Linux version ";
  const auto* begin = image.data();
  const auto* end = image.data() + image.size();
  const auto* hit = std::search(begin, end, kBanner.begin(), kBanner.end());
  if (hit == end) {
    why = "the ELF image has no \"Linux version\" banner";
    return std::nullopt;
  }
  const std::size_t at = static_cast<std::size_t>(hit - begin) + kBanner.size();
  return first_word(image.subspan(at, std::min<std::size_t>(image.size() - at, 256)), why);
}

}  // namespace

std::optional<std::string> kernel_release(std::span<const std::uint8_t> image, std::string& why) {
  if (image.size() >= 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0) {
    return from_elf(image, why);
  }
  if (image.size() >= 0x210 && std::memcmp(image.data() + 0x202, "HdrS", 4) == 0) {
    return from_bzimage(image, why);
  }
  why = "not a bzImage (no HdrS at 0x202) or an ELF vmlinux";
  return std::nullopt;
}

}  // namespace minivmm::vmm::exec
