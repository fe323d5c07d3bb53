#include "vmm/exec/initramfs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "vmm/exec/cpio_writer.h"
#include "vmm/snapshot/crc32c.h"

namespace minivmm::vmm::exec {
namespace {

constexpr std::size_t kMaxArchive = 1u << 30;

std::optional<std::vector<std::uint8_t>> read_cache_file(const std::string& path, std::size_t max) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st{};
  std::optional<std::vector<std::uint8_t>> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) <= max) {
    out.emplace(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < out->size()) {
      const ssize_t n = ::read(fd, out->data() + got, out->size() - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got != out->size()) out.reset();
  }
  ::close(fd);
  return out;
}

bool write_cache_file(const std::string& path, const std::string& text_or_bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < text_or_bytes.size()) {
    const ssize_t n = ::write(fd, text_or_bytes.data() + done, text_or_bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const bool ok = done == text_or_bytes.size() && ::close(fd) == 0;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string seal_line(const std::vector<std::uint8_t>& bytes) {
  return "cpio_size=" + std::to_string(bytes.size()) + "\ncpio_crc32c=" +
         std::to_string(crc32c(bytes)) + "\n";
}

std::optional<std::vector<std::uint8_t>> pack(const InitramfsInputs& in, std::string& why) {
  CpioWriter w;
  for (const char* d : {"dev", "proc", "sys", "tmp", "lower", "rw", "newroot", "modules"}) {
    w.add_directory(d);
  }
  w.add_file("init", in.init, 0755);
  std::string list;
  std::vector<std::string> dirs_made;
  for (const ModuleFile& m : in.modules.load_order) {
    const std::string full = in.modules_dir + "/" + m.rel_path;
    const auto bytes = read_cache_file(full, kMaxArchive);
    if (!bytes) {
      why = full + ": cannot read it (" + std::strerror(errno) + ")";
      return std::nullopt;
    }
    // Each folder on the way, once.
    for (std::size_t slash = m.rel_path.find('/'); slash != std::string::npos;
         slash = m.rel_path.find('/', slash + 1)) {
      const std::string dir = "modules/" + m.rel_path.substr(0, slash);
      if (std::find(dirs_made.begin(), dirs_made.end(), dir) == dirs_made.end()) {
        w.add_directory(dir);
        dirs_made.push_back(dir);
      }
    }
    w.add_file("modules/" + m.rel_path, *bytes);
    list += "/modules/" + m.rel_path + "\n";
  }
  w.add_file("modules.list", {reinterpret_cast<const std::uint8_t*>(list.data()), list.size()});
  return w.finish();
}

}  // namespace

std::string default_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/minivmm/exec";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && home[0] == '/' ? home : "/tmp") + "/.cache/minivmm/exec";
}

std::string initramfs_key(const InitramfsInputs& in) {
  std::string key = "minivmm exec initramfs 1\nrelease=" + in.release + "\ninit=" +
                    std::to_string(in.init.size()) + "," + std::to_string(crc32c(in.init)) + "\n";
  for (const ModuleFile& m : in.modules.load_order) {
    key += "module=" + m.rel_path + "," + std::to_string(m.size) + "," +
           std::to_string(m.mtime_ns) + "\n";
  }
  return key;
}

std::optional<InitramfsResult> make_initramfs(const InitramfsInputs& in, std::string& why) {
  InitramfsResult r;
  const std::string dir = in.cache_dir.empty() ? default_cache_dir() : in.cache_dir;
  const std::string key = initramfs_key(in);
  const auto span = std::span(reinterpret_cast<const std::uint8_t*>(key.data()), key.size());
  const std::uint64_t h = (std::uint64_t{crc32c(span)} << 32) | crc32c(span, 0x9e3779b9u);
  const std::string base = dir + "/" + in.release + "-" + hex64(h);
  r.path = base + ".cpio";
  const auto key_file = read_cache_file(base + ".key", 1u << 24);
  if (key_file) {
    const std::string text(key_file->begin(), key_file->end());
    auto cached = read_cache_file(r.path, kMaxArchive);
    if (cached && text == key + seal_line(*cached)) {
      r.bytes = std::move(*cached);
      r.cache_hit = true;
      return r;
    }
    r.cache_note = "the cached " + r.path + " did not match its key; rebuilt";
  }
  auto bytes = pack(in, why);
  if (!bytes) return std::nullopt;
  r.bytes = std::move(*bytes);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string archive(r.bytes.begin(), r.bytes.end());
  // The archive first, its key last: a key file always describes a whole archive.
  if (ec || !write_cache_file(r.path, archive) || !write_cache_file(base + ".key", key + seal_line(r.bytes))) {
    r.cache_note = "cannot write the cache in " + dir + (ec ? ": " + ec.message() : "");
    r.path.clear();
  }
  return r;
}

}  // namespace minivmm::vmm::exec
