// libFuzzer target: parse_size (--memory). Checked: no crash or UB on any text, and what it
// accepts is consistent: digits, at most one K/M/G/T (optionally followed by B, iB, ib or b) or
// a lone B, and the value is the digits shifted by the suffix, without overflow.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "vmm/machine/size_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto v = minivmm::vmm::parse_size(text);
  if (!v) return 0;
  // Recompute independently: the digit prefix with wide arithmetic, then the suffix.
  std::size_t i = 0;
  unsigned __int128 digits = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    digits = digits * 10 + static_cast<unsigned>(text[i] - '0');
    if (digits > UINT64_MAX) break;
    ++i;
  }
  const std::string_view suffix = text.substr(i);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (suffix[0]) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      case 't':
      case 'T':
        shift = 40;
        break;
      case 'b':
      case 'B':
        shift = 0;
        break;
      default:
        std::fprintf(stderr, "parse_size accepted an unknown suffix\n");
        std::abort();
    }
  }
  if (i == 0 || digits > UINT64_MAX || (digits << shift) > UINT64_MAX ||
      static_cast<std::uint64_t>(digits << shift) != *v) {
    std::fprintf(stderr, "parse_size returned %llu for a text it should reject or read otherwise\n",
                 static_cast<unsigned long long>(*v));
    std::abort();
  }
  return 0;
}
