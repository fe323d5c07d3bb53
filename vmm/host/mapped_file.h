// A kernel or initrd file, mapped read-only rather than read into a copy (issue 20): a
// 3 GiB all-zero "kernel" used to cost 3.1 GiB of memory and 12.7 s before its header was
// rejected, and a loaded image stayed in memory for the whole run. Now the size comes from
// fstat before any byte is read, the loaders read what they look at through the mapping (a
// rejected header costs the pages it touched), and the mapping goes once the guest's RAM holds
// what it needs.
//
// A file that shrinks while it is mapped would make a read of a vanished page raise SIGBUS.
// While a TruncationGuard lives, such a fault is answered by mapping zeros over the page and
// noting it, so the loader runs to its end; the caller then asks the guard which file shrank
// and refuses it instead of crashing. Other SIGBUS faults go to the previous handler.
//
// Threads: open and load on one thread, before any other thread exists (the guard replaces a
// process-wide signal disposition for its lifetime).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "vmm/exit_code.h"

namespace minivmm::vmm {

// The largest file that can be loaded, what bounds it ("the guest RAM (--memory)") and the
// exit code of a file over it (a usage error when the user can lift the bound).
struct FileSizeLimit {
  std::uint64_t max_bytes;
  ExitCode code;
  std::string bound;
};

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Opens `path` non-blocking (a FIFO nobody writes never hangs the start), checks on the open
  // fd that it is a regular file within `limit`, and maps it. Throws VmmError naming `option`
  // and the path: `code` when the file cannot be used, limit.code when it is too big. An empty
  // file maps to an empty span.
  static MappedFile open(const std::string& option, const std::string& path, ExitCode code,
                         const FileSizeLimit& limit);

  std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(addr_), size_};
  }
  const std::string& path() const noexcept { return path_; }

 private:
  friend class TruncationGuard;
  void* addr_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
};

// Answers SIGBUS on the pages of the given files with zeros while it lives (see above).
class TruncationGuard {
 public:
  static constexpr std::size_t kMaxFiles = 4;

  // At most kMaxFiles; null entries are skipped.
  explicit TruncationGuard(std::initializer_list<const MappedFile*> files);
  ~TruncationGuard();
  TruncationGuard(const TruncationGuard&) = delete;
  TruncationGuard& operator=(const TruncationGuard&) = delete;

  // The first file a vanished page was found in, or nullptr.
  const MappedFile* truncated() const noexcept;
};

}  // namespace minivmm::vmm
