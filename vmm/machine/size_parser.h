// Parses a memory size as users write it: "64M", "1G", "512MiB", "65536" (bytes), "4k".
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <string_view>

namespace minivmm::vmm {

// nullopt for anything malformed: empty, a sign, no digits, an unknown suffix, overflow.
std::optional<std::uint64_t> parse_size(std::string_view text) noexcept;

// --mailbox GPA,SIZE: each a size as above or 0x-prefixed hex, both 4 KiB aligned, SIZE > 0,
// GPA + SIZE without overflow (the guest's RAM size is checked where it is known). nullopt
// for anything else.
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_mailbox(std::string_view text) noexcept;

}  // namespace minivmm::vmm
