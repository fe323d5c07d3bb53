// Parses a memory size as users write it: "64M", "1G", "512MiB", "65536" (bytes), "4k".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace minivmm::vmm {

// nullopt for anything malformed: empty, a sign, no digits, an unknown suffix, overflow.
std::optional<std::uint64_t> parse_size(std::string_view text) noexcept;

}  // namespace minivmm::vmm
