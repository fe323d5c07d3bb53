// A file the user asks minivmm to write (`--stats`; `minivmm test`'s --tap, --junit and every
// file of its --logs folder), handled so that naming it can never destroy anything:
//  - check(): judged with every other input, before anything is created, truncated or opened,
//    and before /dev/kvm: not empty, not a directory, a socket or a block device (a report
//    written onto a disk would destroy what it holds; refusing it replaces nothing), in a
//    folder that exists and can be written, and never one of the run's input files (device
//    and inode, symlinks resolved), nor in one of its input folders, so `--stats k.bin
//    --kernel k.bin` is a usage error instead of a lost kernel.
//  - open(): after every input check passed. A FIFO is opened non-blocking, so one without a
//    reader is a one-line error instead of a hang; a regular file is not touched yet.
//  - write(): at the end. A regular file gets the whole text in a temporary file beside it,
//    renamed into place, so a killed run leaves the old report or none, never half of one; a
//    FIFO, a character device (/dev/null, a terminal), a /dev/fd-style alias and `-` (stdout)
//    are written directly, with write(2) (no stdio: glibc's buffer set-up asks ioctl(TCGETS)
//    of a character device, which is not the loop thread's business under its seccomp filter).
//    A failed write (/dev/full, a reader that went away) is reported, never ignored.
//
// Threads: one thread at a time (main, which becomes the loop thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::vmm {

// An input of the run, named by the option that gave it (--kernel, --initrd, --drive). A
// `folder` is one whose files the run reads (exec's --modules): no output lands anywhere in it,
// by its own name or by a symbolic link's target.
struct InputFile {
  std::string option;
  std::string path;
  bool folder = false;
};

class OutputFile {
 public:
  enum class Kind { kNone, kStdout, kRegular, kDirect };

  OutputFile() = default;
  ~OutputFile();
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Judges `path` as the value of `option`; "-" is stdout. Throws VmmError(kUsage) with one
  // line naming the option, the path and the reason. Touches nothing.
  static OutputFile check(std::string option, std::string path,
                          const std::vector<InputFile>& inputs);

  // Opens a FIFO or character device (non-blocking for a FIFO: ENXIO means no reader); a
  // regular file waits for write(). Throws VmmError(kUsage).
  void open();

  // Writes `text` as described above. Returns false with `error` set (one line) on failure.
  bool write(std::string_view text, std::string& error) noexcept;

  // How long write() waits for a FIFO's or a terminal's reader to take anything (10 s).
  void set_write_timeout(std::chrono::milliseconds t) noexcept { write_timeout_ = t; }

  Kind kind() const noexcept { return kind_; }
  const std::string& path() const noexcept { return path_; }
  // kRegular: the real path the report is renamed onto (two reports of one run must not
  // share one); empty for the other kinds.
  const std::string& resolved() const noexcept { return resolved_; }

 private:
  bool write_regular(std::string_view text, std::string& error) noexcept;

  std::string option_;
  std::string path_;      // as given
  std::string resolved_;  // regular files: the real path the temporary file is renamed onto
  Kind kind_ = Kind::kNone;
  int fd_ = -1;           // kDirect once open()ed
  std::chrono::milliseconds write_timeout_{10'000};
};

// A log that grows while a run goes on (a test's console, which a child writes), so it cannot
// be written beside and renamed: `path` must be a regular file or nothing. A FIFO, a device, a
// directory, a socket or a symbolic link there is refused without being opened (no wait for a
// FIFO's reader, no device replaced or truncated). Returns the fd (blocking, close-on-exec),
// or -1 with `error` set (one line, naming the path).
int open_streamed_log(const std::string& path, std::string& error) noexcept;

}  // namespace minivmm::vmm
