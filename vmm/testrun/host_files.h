// The two questions `minivmm test` asks of the host's files: is this a regular file, and what
// does it hold. A FIFO or a device named as a manifest, a cfg or a sysfs value is refused, not
// waited on.
#pragma once

#include <optional>
#include <string>

namespace minivmm::testrun {

// The whole contents of the regular file at `path`; nullopt when it cannot be opened or is not
// a regular file.
std::optional<std::string> read_regular_file(const std::string& path);

bool is_regular_file(const std::string& path);

}  // namespace minivmm::testrun
