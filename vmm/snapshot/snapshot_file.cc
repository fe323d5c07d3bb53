#include "vmm/snapshot/snapshot_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "vmm/snapshot/crc32c.h"

namespace minivmm::vmm {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Little-endian field reads over untrusted bytes; the caller checked the length.
template <typename T>
T load(const std::uint8_t* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void store(std::vector<std::uint8_t>& out, T v) {
  std::uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof v);
  out.insert(out.end(), raw, raw + sizeof v);
}

std::uint64_t round_up_page(std::uint64_t n) noexcept {
  return (n + kSnapshotPage - 1) / kSnapshotPage * kSnapshotPage;
}

bool valid_name(std::string_view name) noexcept {
  return !name.empty() && name.size() <= kMaxSectionName &&
         std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// pwrite all of it, or say why not.
void write_all(int fd, const void* data, std::size_t len, std::uint64_t off, const char* what) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw SnapshotError(std::string("writing ") + what + ": " + errno_text());
    p += n;
    len -= static_cast<std::size_t>(n);
    off += static_cast<std::uint64_t>(n);
  }
}

bool all_zero(const std::byte* p, std::size_t len) noexcept {
  // Word at a time: a page is 512 words and most written pages differ in their first.
  const auto* w = reinterpret_cast<const std::uint64_t*>(p);
  for (std::size_t i = 0; i < len / 8; ++i) {
    if (w[i] != 0) return false;
  }
  return true;
}

}  // namespace

const SnapshotSection* SnapshotMetadata::find(std::string_view name) const noexcept {
  for (const SnapshotSection& s : sections) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const SnapshotSection& SnapshotMetadata::section(std::string_view name) const {
  if (const SnapshotSection* s = find(name)) return *s;
  throw SnapshotError("the snapshot has no section '" + std::string(name) + "'");
}

SnapshotMetadata parse_snapshot_header(std::span<const std::uint8_t> h, std::uint64_t file_size) {
  if (h.size() < kSnapshotHeaderBytes) {
    throw SnapshotError("the file is " + std::to_string(h.size()) +
                        " bytes, shorter than a snapshot's header");
  }
  if (std::memcmp(h.data(), kSnapshotMagic, sizeof kSnapshotMagic) != 0) {
    throw SnapshotError("not a minivmm snapshot (wrong magic)");
  }
  const auto version = load<std::uint32_t>(h.data() + 8);
  if (version != kSnapshotVersion) {
    throw SnapshotError("snapshot format version " + std::to_string(version) +
                        " (this minivmm reads version " + std::to_string(kSnapshotVersion) + ")");
  }
  const auto crc = load<std::uint32_t>(h.data() + 40);
  if (crc != crc32c(h.first(40))) throw SnapshotError("the header's checksum does not match");
  SnapshotMetadata m;
  const auto count = load<std::uint32_t>(h.data() + 12);
  m.metadata_bytes = load<std::uint64_t>(h.data() + 16);
  m.memory_offset = load<std::uint64_t>(h.data() + 24);
  m.memory_bytes = load<std::uint64_t>(h.data() + 32);
  if (count > kMaxSnapshotSections) {
    throw SnapshotError(std::to_string(count) + " sections (at most " +
                        std::to_string(kMaxSnapshotSections) + ")");
  }
  if (m.metadata_bytes < kSnapshotHeaderBytes || m.metadata_bytes > kMaxSnapshotMetadata) {
    throw SnapshotError("metadata of " + std::to_string(m.metadata_bytes) + " bytes");
  }
  if (m.memory_offset != round_up_page(m.metadata_bytes)) {
    throw SnapshotError("guest memory at offset " + std::to_string(m.memory_offset) +
                        " (not at the first page after the metadata)");
  }
  if (m.memory_bytes == 0 || m.memory_bytes % kSnapshotPage != 0 || m.memory_bytes > (3ull << 30)) {
    throw SnapshotError("guest memory of " + std::to_string(m.memory_bytes) + " bytes");
  }
  if (file_size != m.memory_offset + m.memory_bytes) {
    throw SnapshotError("the file is " + std::to_string(file_size) + " bytes; its header says " +
                        std::to_string(m.memory_offset + m.memory_bytes) +
                        " (cut short, or the memory is the wrong size)");
  }
  m.sections.reserve(count);
  m.sections.resize(count);  // names filled by parse_snapshot_metadata
  return m;
}

SnapshotMetadata parse_snapshot_metadata(std::span<const std::uint8_t> bytes,
                                         std::uint64_t file_size) {
  SnapshotMetadata m = parse_snapshot_header(bytes, file_size);
  if (bytes.size() < m.metadata_bytes) {
    throw SnapshotError("the sections end early (" + std::to_string(bytes.size()) + " of " +
                        std::to_string(m.metadata_bytes) + " bytes)");
  }
  std::size_t pos = kSnapshotHeaderBytes;
  const std::size_t end = static_cast<std::size_t>(m.metadata_bytes);
  auto need = [&](std::size_t n, std::size_t index) {
    if (n > end - pos) {
      throw SnapshotError("section " + std::to_string(index) + " runs past the metadata's end");
    }
  };
  for (std::size_t i = 0; i < m.sections.size(); ++i) {
    need(2, i);
    const auto name_len = load<std::uint16_t>(bytes.data() + pos);
    pos += 2;
    need(name_len, i);
    std::string name(reinterpret_cast<const char*>(bytes.data() + pos), name_len);
    pos += name_len;
    if (!valid_name(name)) throw SnapshotError("section " + std::to_string(i) + " has a bad name");
    need(8, i);
    const auto len = load<std::uint32_t>(bytes.data() + pos);
    const auto crc = load<std::uint32_t>(bytes.data() + pos + 4);
    pos += 8;
    if (len > kMaxSectionBytes) {
      throw SnapshotError("section '" + name + "' is " + std::to_string(len) + " bytes");
    }
    need(len, i);
    const std::span<const std::uint8_t> data = bytes.subspan(pos, len);
    if (crc32c(data) != crc) throw SnapshotError("section '" + name + "': checksum mismatch");
    pos += len;
    for (std::size_t j = 0; j < i; ++j) {
      if (m.sections[j].name == name) throw SnapshotError("section '" + name + "' twice");
    }
    m.sections[i].name = std::move(name);
    m.sections[i].data.assign(data.begin(), data.end());
  }
  if (pos != end) {
    throw SnapshotError(std::to_string(end - pos) + " bytes after the last section");
  }
  return m;
}

std::vector<std::uint8_t> encode_snapshot_metadata(const std::vector<SnapshotSection>& sections,
                                                   std::uint64_t memory_bytes) {
  std::vector<std::uint8_t> body;
  for (const SnapshotSection& s : sections) {
    if (!valid_name(s.name) || s.data.size() > kMaxSectionBytes) {
      throw SnapshotError("internal: section '" + s.name + "' cannot be written");
    }
    store<std::uint16_t>(body, static_cast<std::uint16_t>(s.name.size()));
    body.insert(body.end(), s.name.begin(), s.name.end());
    store<std::uint32_t>(body, static_cast<std::uint32_t>(s.data.size()));
    store<std::uint32_t>(body, crc32c(s.data));
    body.insert(body.end(), s.data.begin(), s.data.end());
  }
  const std::uint64_t metadata_bytes = kSnapshotHeaderBytes + body.size();
  std::vector<std::uint8_t> out(kSnapshotMagic, kSnapshotMagic + sizeof kSnapshotMagic);
  store<std::uint32_t>(out, kSnapshotVersion);
  store<std::uint32_t>(out, static_cast<std::uint32_t>(sections.size()));
  store<std::uint64_t>(out, metadata_bytes);
  store<std::uint64_t>(out, round_up_page(metadata_bytes));
  store<std::uint64_t>(out, memory_bytes);
  store<std::uint32_t>(out, crc32c(out));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

SnapshotWriteStats write_snapshot_file(const std::string& path,
                                       const std::vector<SnapshotSection>& sections,
                                       devices::GuestMemory ram, bool ram_untouched_is_zero) {
  const std::vector<std::uint8_t> meta = encode_snapshot_metadata(sections, ram.size());
  const std::uint64_t mem_off = round_up_page(meta.size());
  // Beside the target, so the rename stays within one file system.
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd.valid()) throw SnapshotError("cannot create '" + tmp + "': " + errno_text());
  SnapshotWriteStats st;
  try {
    // The file's full size first: every page not written below is a hole that reads as zeros.
    if (::ftruncate(fd.get(), static_cast<off_t>(mem_off + ram.size())) != 0) {
      throw SnapshotError("sizing '" + tmp + "': " + errno_text());
    }
    write_all(fd.get(), meta.data(), meta.size(), 0, "the sections");
    const std::span<std::byte> bytes = ram.bytes();
    const std::size_t pages = bytes.size() / kSnapshotPage;
    std::vector<unsigned char> resident;
    if (ram_untouched_is_zero) {
      resident.resize(pages);
      if (::mincore(bytes.data(), bytes.size(), resident.data()) != 0) resident.clear();
    }
    // Runs of pages to write, merged into one pwrite each.
    std::size_t run_start = 0, run_len = 0;
    auto flush = [&] {
      if (run_len == 0) return;
      write_all(fd.get(), bytes.data() + run_start * kSnapshotPage, run_len * kSnapshotPage,
                mem_off + run_start * kSnapshotPage, "guest memory");
      st.memory_written += run_len * kSnapshotPage;
      run_len = 0;
    };
    for (std::size_t p = 0; p < pages; ++p) {
      const bool skip = (!resident.empty() && (resident[p] & 1) == 0) ||
                        all_zero(bytes.data() + p * kSnapshotPage, kSnapshotPage);
      if (skip) {
        flush();
        continue;
      }
      if (run_len == 0) run_start = p;
      ++run_len;
    }
    flush();
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      throw SnapshotError("renaming '" + tmp + "' to '" + path + "': " + errno_text());
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  st.file_bytes = mem_off + ram.size();
  return st;
}

SnapshotFile SnapshotFile::open(const std::string& path) {
  const auto started = std::chrono::steady_clock::now();
  SnapshotFile f;
  f.path = path;
  // O_NONBLOCK: a FIFO given as the snapshot would block open() until a writer came.
  f.fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!f.fd.valid()) {
    const std::string why = errno_text();
    // A socket says ENXIO, which names nothing: say what it is not.
    struct stat what {};
    if (::stat(path.c_str(), &what) == 0 && !S_ISREG(what.st_mode)) {
      throw SnapshotError("'" + path + "' is not a regular file");
    }
    throw SnapshotError("'" + path + "': " + why);
  }
  struct stat st {};
  if (::fstat(f.fd.get(), &st) != 0) throw SnapshotError("'" + path + "': " + errno_text());
  if (!S_ISREG(st.st_mode)) throw SnapshotError("'" + path + "' is not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  auto read_at = [&](std::size_t len) {
    std::vector<std::uint8_t> buf(len);
    std::size_t got = 0;
    while (got < len) {
      const ssize_t n = ::pread(f.fd.get(), buf.data() + got, len - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw SnapshotError("reading '" + path + "': " + errno_text());
      if (n == 0) break;
      got += static_cast<std::size_t>(n);
    }
    buf.resize(got);
    return buf;
  };
  try {
    const auto header = read_at(kSnapshotHeaderBytes);
    const SnapshotMetadata h = parse_snapshot_header(header, size);
    f.meta = parse_snapshot_metadata(read_at(static_cast<std::size_t>(h.metadata_bytes)), size);
  } catch (const SnapshotError& e) {
    throw SnapshotError("'" + path + "': " + e.what());
  }
  f.open_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count();
  return f;
}

}  // namespace minivmm::vmm
