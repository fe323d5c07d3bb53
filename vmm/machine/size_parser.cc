#include "vmm/machine/size_parser.h"

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

namespace {

std::optional<std::uint64_t> parse_address(std::string_view text) noexcept {
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
    if (text.empty() || text.size() > 16) return std::nullopt;
    std::uint64_t v = 0;
    for (const char ch : text) {
      const int d = std::isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                    : (ch >= 'a' && ch <= 'f')                  ? ch - 'a' + 10
                    : (ch >= 'A' && ch <= 'F')                  ? ch - 'A' + 10
                                                                : -1;
      if (d < 0) return std::nullopt;
      v = v << 4 | static_cast<std::uint64_t>(d);
    }
    return v;
  }
  return parse_size(text);
}

}  // namespace

std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_mailbox(std::string_view text) noexcept {
  const auto comma = text.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const auto gpa = parse_address(text.substr(0, comma));
  const auto size = parse_address(text.substr(comma + 1));
  if (!gpa || !size || *size == 0 || *gpa % 4096 != 0 || *size % 4096 != 0) return std::nullopt;
  if (*gpa > UINT64_MAX - *size) return std::nullopt;
  return std::make_pair(*gpa, *size);
}

}  // namespace minivmm::vmm
