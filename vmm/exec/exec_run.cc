#include "vmm/exec/exec_run.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "devices/log/log.h"
#include "vmm/exec/cpio_writer.h"
#include "vmm/exec/exec_spec.h"
#include "vmm/exec/exec_status.h"
#include "vmm/exec/initramfs.h"
#include "vmm/exec/kernel_version.h"
#include "vmm/exec/module_set.h"
#include "vmm/host/output_file.h"
#include "vmm/kvm/kvm.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/virtio_mmio_devices.h"
#include "vmm/vmm_error.h"

extern char** environ;

namespace minivmm::vmm::exec {
namespace {

// The modules the init needs; the optional ones where the kernel has them.
const std::vector<WantedModule>& wanted_modules() {
  static const std::vector<WantedModule> kWanted{
      {"virtio_mmio", true},  {"virtio_console", true}, {"9pnet", true},
      {"9pnet_virtio", true}, {"9p", true},             {"overlay", false},
      {"pvpanic_mmio", false}};
  return kWanted;
}

int exec_say(int code, const std::string& line) {
  std::fprintf(stderr, "minivmm exec: %s\n", one_line(line).c_str());
  return code;
}

std::optional<std::vector<std::uint8_t>> read_kernel_image(const std::string& path, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = fd < 0 ? std::strerror(errno) : "not a regular file";
    if (fd >= 0) ::close(fd);
    return std::nullopt;
  }
  std::vector<std::uint8_t> out(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

bool write_all_fd(int fd, std::span<const std::uint8_t> bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// After the run this thread is still the loop's, under its seccomp filter (read and write,
// no pread or lseek): `fd` is a second open of the memory file, at offset 0.
std::string read_console(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// The spec, in an archive of its own after the cached one, in a memory file the Machine maps
// as its --initrd; -1 and `why` on failure.
int initrd_memfd(const std::vector<std::uint8_t>& cached, const ExecSpec& spec, std::string& why) {
  const auto bytes = encode_spec(spec, why);
  if (!bytes) return -1;
  CpioWriter w;
  w.add_file("exec.spec", *bytes);
  const auto tail = w.finish();
  const int fd = ::memfd_create("minivmm-exec-initrd", MFD_CLOEXEC);
  if (fd < 0 || !write_all_fd(fd, cached) || !write_all_fd(fd, tail)) {
    why = std::string("memfd: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

static_assert(kMaxExecShares + 3 == VirtioMmioDevices::kMaxDevices,
              "machine_config() adds the root share and two output consoles to the --shares");

Config machine_config(const ExecOptions& o, const ExecSpec& spec, const std::string& kernel,
                      int initrd_fd, int console_fd) {
  Config c;
  // The host's / read-only (the guest's root, under a tmpfs), then each --share (virtio-9p,
  // docs/9p.md): one virtio-9p device each, after the two output consoles.
  c.shares.push_back({"/", true, spec.root_tag});
  for (const SpecShare& s : spec.shares) c.shares.push_back({s.path, s.read_only, s.tag});
  c.kernel_path = kernel;
  c.initrd_path = "/proc/self/fd/" + std::to_string(initrd_fd);
  // COM1 for the kernel; panic=-1 reboots a kernel that panics before pvpanic is bound (the
  // i8042 reset ends the run without a status: exit 251).
  // pci=off: there is no PCI, and probing for it (the AGP aperture check among others) costs
  // seconds of port exits under nested KVM; tsc=reliable: no clocksource watchdog.
  c.cmdline = "console=ttyS0 panic=-1 rdinit=/init random.trust_cpu=on pci=off tsc=reliable";
  if (!o.verbose) c.cmdline += " quiet";
  c.memory_bytes = o.memory_bytes;
  c.cpus = o.cpus;
  if (o.timeout_s > 0) c.duration_s = o.timeout_s;
  c.duration_status = kTimeoutRunStatus;
  c.dump_vcpus_on_duration = true;
  c.quiet_summary = true;
  c.console_input = false;
  c.output_console_fds = {STDOUT_FILENO, STDERR_FILENO};
  c.virtio_in_acpi = true;
  c.kernel_console_fd = console_fd;
  return c;
}

}  // namespace

std::string last_lines(const std::string& text, std::size_t lines) {
  std::vector<std::string> all;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) all.push_back(std::move(line));
    at = nl + 1;
  }
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "  | " + all[i] + "\n";
  }
  return out;
}

int run_exec(const ExecOptions& o) {
  std::string kernel = o.kernel;
  if (kernel.empty()) {
    struct utsname u{};
    ::uname(&u);
    kernel = std::string("/boot/vmlinuz-") + u.release;
  }
  // Each --share is a virtio device, beside the root's and the two output consoles.
  if (o.shares.size() > kMaxExecShares) {
    return exec_say(kExecUsage, "--share: at most " + std::to_string(kMaxExecShares) +
                                    " (each is a virtio device; the board has " +
                                    std::to_string(VirtioMmioDevices::kMaxDevices) +
                                    ", and the guest's root and its two consoles take " +
                                    std::to_string(VirtioMmioDevices::kMaxDevices - kMaxExecShares) +
                                    "), not " + std::to_string(o.shares.size()));
  }
  std::string why;
  const auto image = read_kernel_image(kernel, why);
  if (!image) return exec_say(kExecUsage, "no kernel at " + kernel + " (" + why + "); pass --kernel FILE");
  const auto release = kernel_release(*image, why);
  if (!release) return exec_say(kExecUsage, kernel + ": " + why + "; pass --kernel a bzImage or vmlinux");
  const std::string modules_dir = o.modules_dir.empty() ? "/lib/modules/" + *release : o.modules_dir;
  struct stat st{};
  if (::stat(modules_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return exec_say(kExecUsage, "no modules folder " + modules_dir + " for kernel " + *release +
                               "; pass --modules DIR (the kernel's lib/modules/" + *release + ")");
  }
  // --stats is judged with the inputs, before anything is built or opened (output_file.h): never
  // the kernel, and never in the modules folder, whose files the run reads (modules.dep).
  OutputFile stats;
  if (o.stats) {
    try {
      stats = OutputFile::check("--stats", o.stats_path,
                                {{"--kernel", kernel}, {"--modules", modules_dir, true}});
    } catch (const VmmError& e) {
      return exec_say(kExecUsage, e.what());
    }
  }
  auto modules = resolve_modules(modules_dir, wanted_modules(), why);
  if (!modules) return exec_say(kExecSetupFailed, why);
  // KVM's CPUID answer on a thread while the initramfs is made (vmm/kvm/kvm.h).
  prefetch_supported_cpuid();
  InitramfsInputs in{*release, modules_dir, std::move(*modules), exec_init_image(), o.cache_dir};
  const auto initramfs = make_initramfs(in, why);
  if (!initramfs) return exec_say(kExecSetupFailed, why);
  if (!initramfs->cache_note.empty()) log::info("{}", initramfs->cache_note);

  ExecSpec spec;
  spec.argv = o.argv;
  spec.env = exec_environment(environ);
  char cwd[4096];
  spec.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
  spec.root_tag = "minivmm-root";
  for (std::size_t i = 0; i < o.shares.size(); ++i) {
    spec.shares.push_back({"minivmm-share" + std::to_string(i), o.shares[i].path,
                           o.shares[i].read_only});
  }
  const int initrd = initrd_memfd(initramfs->bytes, spec, why);
  if (initrd < 0) return exec_say(kExecSetupFailed, why);
  const int console = o.verbose ? ::dup(STDERR_FILENO)
                                : ::memfd_create("minivmm-exec-console", MFD_CLOEXEC);
  if (console < 0) {
    ::close(initrd);
    return exec_say(kExecSetupFailed, std::string("the kernel console's file: ") + std::strerror(errno));
  }
  const int console_reader =
      o.verbose ? -1 : ::open(("/proc/self/fd/" + std::to_string(console)).c_str(), O_RDONLY | O_CLOEXEC);
  int status = 0;
  std::string reason;
  try {
    Machine machine(machine_config(o, spec, kernel, initrd, console), [&] { stats.open(); });
    status = machine.run();
    reason = machine.report().exit_reason;
    // Written also after a --timeout or a fault: the counters say where a hung run stood.
    std::string error;
    if (stats.kind() != OutputFile::Kind::kNone &&
        !stats.write(machine.report().to_json().dump(2) + "\n", error)) {
      exec_say(kExecSetupFailed, "--stats: cannot write the report to '" + stats.path() + "': " + error);
    }
  } catch (const VmmError& e) {
    ::close(initrd);
    // An option the Machine refused (--memory over its limit) is the user's to fix.
    return exec_say(e.code() == ExitCode::kUsage ? kExecUsage : kExecSetupFailed, e.what());
  } catch (const std::exception& e) {
    ::close(initrd);
    return exec_say(kExecSetupFailed, e.what());
  }
  ::close(initrd);
  const ExecOutcome out = decode_exec_status(status, reason);
  if (!out.message.empty()) exec_say(out.exit_code, out.message + " (exit " + std::to_string(out.exit_code) + ")");
  if (out.show_console && !o.verbose) {
    const std::string tail = last_lines(read_console(console_reader), 25);
    if (!tail.empty()) std::fprintf(stderr, "minivmm exec: the kernel console's last lines:\n%s", tail.c_str());
  }
  ::close(console);
  return out.exit_code;
}

}  // namespace minivmm::vmm::exec
