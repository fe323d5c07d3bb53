#include "vmm/machine/drive_spec.h"

namespace minivmm::vmm {

std::optional<DriveSpec> parse_drive_spec(const std::string& spec, std::string& error) {
  DriveSpec d;
  const auto comma = spec.find(',');
  d.path = spec.substr(0, comma);
  if (d.path.empty()) {
    error = "'" + spec + "' has no file name (FILE[,ro][,aio=io_uring|threads])";
    return std::nullopt;
  }
  std::string rest = comma == std::string::npos ? "" : spec.substr(comma + 1);
  while (comma != std::string::npos) {
    const auto next = rest.find(',');
    const std::string opt = rest.substr(0, next);
    if (opt == "ro") {
      d.read_only = true;
    } else if (opt == "aio=io_uring") {
      d.aio = DriveAio::kIoUring;
    } else if (opt == "aio=threads") {
      d.aio = DriveAio::kThreads;
    } else {
      error = "'" + spec + "': unknown option '" + opt + "' (FILE[,ro][,aio=io_uring|threads])";
      return std::nullopt;
    }
    if (next == std::string::npos) break;
    rest = rest.substr(next + 1);
  }
  return d;
}

}  // namespace minivmm::vmm
