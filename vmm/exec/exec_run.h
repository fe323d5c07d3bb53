// `minivmm exec`: boot a kernel with an initramfs made on the fly, run one host command in it
// and return its status (docs/exec.md). The steps: find the kernel and its release, resolve
// and pack the modules (cached), write the run's spec, build a Machine whose COM1 goes to a
// memory file (the kernel's messages; stderr with --verbose), whose two output-only
// virtio-consoles are the command's stdout and stderr, whose virtio windows are in the ACPI
// DSDT, and whose --duration is the timeout; run it and decode its status (exec_status.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace minivmm::vmm::exec {

struct ExecShareOption {
  std::string path;  // absolute, resolved
  bool read_only = false;
};

struct ExecOptions {
  std::string kernel;       // "" : /boot/vmlinuz-$(uname -r)
  std::string modules_dir;  // "" : /lib/modules/RELEASE
  std::vector<ExecShareOption> shares;
  std::uint64_t memory_bytes = 512ull << 20;
  std::uint32_t cpus = 1;
  double timeout_s = 0;  // 0: none
  bool verbose = false;
  std::vector<std::string> argv;
  std::string cache_dir;  // "" : initramfs.h's default
  bool stats = false;      // --stats given: the report goes to stats_path (output_file.h)
  std::string stats_path;
};

// --share's limit: the board's virtio devices (8) less the root share and the two output
// consoles machine_config() adds.
inline constexpr std::size_t kMaxExecShares = 5;

// The process exit code (exec_status.h); says what went wrong on stderr.
int run_exec(const ExecOptions& options);

// The init built into minivmm (guest/exec_init/).
std::span<const std::uint8_t> exec_init_image() noexcept;

// The last `lines` lines of `text`, each prefixed "  | " (the kernel console's tail).
std::string last_lines(const std::string& text, std::size_t lines);

}  // namespace minivmm::vmm::exec
