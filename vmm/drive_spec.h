// `--drive FILE[,ro]` and `--console serial|virtio`, parsed into what the Machine builds.
#pragma once

#include <optional>
#include <string>

namespace minivmm::vmm {

struct DriveSpec {
  std::string path;
  bool read_only = false;
};

// Parses FILE[,ro]. Returns nullopt with `error` set to a one-line reason on a bad spec (empty
// file name, unknown option). Does not touch the file: BlockFile::open checks that.
std::optional<DriveSpec> parse_drive_spec(const std::string& spec, std::string& error);

}  // namespace minivmm::vmm
