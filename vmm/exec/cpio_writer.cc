#include "vmm/exec/cpio_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

namespace minivmm::vmm::exec {
namespace {

constexpr std::size_t kMaxName = 4095;  // PATH_MAX less the NUL: the kernel's own bound

void cpio_pad4(std::vector<std::uint8_t>& out) {
  while (out.size() % 4 != 0) out.push_back(0);
}

void cpio_hex8(std::vector<std::uint8_t>& out, std::uint64_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(v));
  out.insert(out.end(), buf, buf + 8);
}

}  // namespace

bool valid_cpio_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxName || name.front() == '/' || name.back() == '/') {
    return false;
  }
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t end = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return name.find('\0') == std::string_view::npos;
}

void CpioWriter::add(std::string_view name, std::uint32_t mode,
                     std::span<const std::uint8_t> data) {
  if (!valid_cpio_name(name) && name != "TRAILER!!!") {
    throw std::invalid_argument("cpio: bad entry name '" + std::string(name) + "'");
  }
  if (data.size() > 0xffffffffu) throw std::invalid_argument("cpio: entry over 4 GiB");
  static constexpr char kMagic[] = "070701";
  out_.insert(out_.end(), kMagic, kMagic + 6);
  const bool trailer = name == "TRAILER!!!";
  cpio_hex8(out_, trailer ? 0 : ++ino_);  // ino: distinct, so no two entries look like hard links
  cpio_hex8(out_, mode);
  cpio_hex8(out_, 0);  // uid
  cpio_hex8(out_, 0);  // gid
  cpio_hex8(out_, trailer ? 1 : (S_ISDIR(mode) ? 2 : 1));  // nlink
  cpio_hex8(out_, 0);  // mtime: fixed, so equal inputs give equal archives
  cpio_hex8(out_, data.size());
  for (int i = 0; i < 4; ++i) cpio_hex8(out_, 0);  // devmajor, devminor, rdevmajor, rdevminor
  cpio_hex8(out_, name.size() + 1);
  cpio_hex8(out_, 0);  // check: unused by newc
  out_.insert(out_.end(), name.begin(), name.end());
  out_.push_back(0);
  cpio_pad4(out_);
  out_.insert(out_.end(), data.begin(), data.end());
  cpio_pad4(out_);
}

void CpioWriter::add_directory(std::string_view name, std::uint32_t mode) {
  add(name, S_IFDIR | (mode & 07777), {});
}

void CpioWriter::add_file(std::string_view name, std::span<const std::uint8_t> data,
                          std::uint32_t mode) {
  add(name, S_IFREG | (mode & 07777), data);
}

std::vector<std::uint8_t> CpioWriter::finish() {
  add("TRAILER!!!", 0, {});
  std::vector<std::uint8_t> done;
  done.swap(out_);
  ino_ = 0;
  return done;
}

}  // namespace minivmm::vmm::exec
