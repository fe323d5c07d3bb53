// A newc ("070701") cpio archive, the format Linux unpacks as an initramfs
// (Documentation/driver-api/early-userspace/buffer-format.rst): per entry a 110-byte ASCII
// header of thirteen 8-digit hex fields, the name with its NUL, padding to 4 bytes, the data,
// padding to 4 bytes; "TRAILER!!!" last. Archives can be concatenated (the kernel unpacks one
// after another), which is how minivmm exec adds a run's spec to a cached archive.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::vmm::exec {

class CpioWriter {
 public:
  // Names are relative ("init", "lib/modules/x.ko"), without "." or ".." components, at most
  // 4095 bytes; anything else throws std::invalid_argument (the archive stays as it was).
  void add_directory(std::string_view name, std::uint32_t mode = 0755);
  void add_file(std::string_view name, std::span<const std::uint8_t> data,
                std::uint32_t mode = 0644);
  // Ends the archive (the trailer) and hands it over; the writer is empty again.
  std::vector<std::uint8_t> finish();

  std::size_t entries() const noexcept { return ino_; }

 private:
  void add(std::string_view name, std::uint32_t mode, std::span<const std::uint8_t> data);
  std::vector<std::uint8_t> out_;
  std::uint32_t ino_ = 0;
};

// Whether `name` is a name add_file() takes.
bool valid_cpio_name(std::string_view name) noexcept;

}  // namespace minivmm::vmm::exec
