// `--drive FILE[,ro][,aio=io_uring|threads]` and `--console serial|virtio`, parsed into what the
// Machine builds.
#pragma once

#include <optional>
#include <string>

namespace minivmm::vmm {

// Who does a disk's I/O (docs/virtio.md): io_uring from the loop, or a worker thread. kAuto:
// io_uring where the build and the kernel allow it, else the worker (said at info level).
enum class DriveAio { kAuto, kIoUring, kThreads };

struct DriveSpec {
  std::string path;
  bool read_only = false;
  DriveAio aio = DriveAio::kAuto;
};

// Parses FILE[,ro][,aio=io_uring|threads]. Returns nullopt with `error` set to a one-line reason on a bad spec (empty
// file name, unknown option). Does not touch the file: BlockFile::open checks that.
std::optional<DriveSpec> parse_drive_spec(const std::string& spec, std::string& error);

}  // namespace minivmm::vmm
