#include "vmm/cli/size_parser.h"

#include <cctype>

namespace minivmm::vmm {

std::optional<std::uint64_t> parse_size(std::string_view text) noexcept {
  std::size_t i = 0;
  std::uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::string_view suffix = text.substr(i);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      case 'B': if (suffix.size() == 1) return value; return std::nullopt;
      default: return std::nullopt;
    }
    suffix.remove_prefix(1);
    if (!suffix.empty() && suffix != "B" && suffix != "iB" && suffix != "ib" && suffix != "b") {
      return std::nullopt;
    }
  }
  if (shift && value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace minivmm::vmm
