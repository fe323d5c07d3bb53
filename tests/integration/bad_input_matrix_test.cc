// The bad-input matrix: every `minivmm run` option with empty, negative, huge, non-numeric and
// conflicting values; kernels that are empty, truncated at every header boundary of the three
// formats, with bad magic, oversize, a directory, a FIFO, unreadable; an initrd that does not
// fit; control socket paths that exist, are too long or sit in a missing folder.
//
// Each case runs the real binary and expects what a user is promised (README, "Exit codes"):
// exactly one line on stderr, the documented exit code, no crash (no signal), no hang (a
// deadline, then SIGKILL). Every check of user input happens before /dev/kvm is opened, so the
// matrix needs no KVM and runs under the `unit` label. The in-process cases (the loaders and
// the control socket) also check that a rejected input leaves no fd open.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "loop/event_loop.h"
#include "loop/poller.h"
#include "tests/unit/vmm/boot/bzimage_builder.h"
#include "tests/unit/vmm/boot/elf_builder.h"
#include "timers/dynticks.h"
#include "timers/monotonic_clock.h"
#include "timers/poll_timeout_alarm.h"
#include "timers/timer_list.h"
#include "vmm/control/control_socket.h"
#include "vmm/kvm/guest_ram_mapping.h"
#include "vmm/boot/guest_kernel_loader.h"
#include "vmm/host/mapped_file.h"
#include "vmm/vmm_error.h"
#include "tests/support/unix_socket.h"

#include "run_minivmm.h"  // kUsage, kBadKernel

namespace minivmm::testing {
namespace {

using vmm::testing::BzImageSpec;
using vmm::testing::ElfSpec;
using vmm::testing::le_bytes;
using vmm::testing::make_bzimage;
using vmm::testing::make_elf;
using vmm::testing::make_note;
using vmm::testing::pattern_bytes;
using vmm::testing::put;

// A hang is what this catches; the figure only has to outlast a slow run (a ThreadSanitizer
// build on a busy 2-core host reading an 80 MiB image).
constexpr int kDeadlineMs = 20000;

struct Outcome {
  int exit_code = -1;
  int term_signal = 0;
  bool timed_out = false;
  std::string err;
};

// Runs the binary with stdin at /dev/null, stdout discarded and stderr captured. No sleeping:
// poll() on the stderr pipe until EOF (the child's exit) or the deadline, then reap.
Outcome run(const std::vector<std::string>& args) {
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return {};
  std::vector<std::string> argv_s{MINIVMM_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(err_pipe[1], 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(err_pipe[1]);
  Outcome o;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kDeadlineMs);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      o.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{err_pipe[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(err_pipe[0], buf, sizeof buf);
    if (n <= 0) break;
    o.err.append(buf, static_cast<std::size_t>(n));
  }
  close(err_pipe[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.term_signal = WTERMSIG(status);
  return o;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void expect_one_line_error(const Outcome& o, int code, const std::string& what) {
  EXPECT_FALSE(o.timed_out) << what << ": hung";
  EXPECT_EQ(o.term_signal, 0) << what << ": " << o.err;
  EXPECT_EQ(o.exit_code, code) << what << ": " << o.err;
  EXPECT_EQ(lines(o.err), 1) << what << ": " << o.err;
  EXPECT_EQ(o.err.rfind("minivmm: ", 0), 0u) << what << ": " << o.err;
}

int open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/minivmm-matrix-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    // Flat: every test puts files, never folders with contents, in it.
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string p = path_ + "/" + e->d_name;
        if (unlink(p.c_str()) != 0) rmdir(p.c_str());
      }
      closedir(d);
    }
    rmdir(path_.c_str());
  }
  std::string file(const std::string& name, const std::vector<std::byte>& data) const {
    const std::string p = path_ + "/" + name;
    const int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!data.empty() && write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
      ADD_FAILURE() << "short write to " << p;
    }
    close(fd);
    return p;
  }
  // A sparse file of `size` bytes: an "oversize" image costs no disk.
  std::string sparse(const std::string& name, off_t size) const {
    const std::string p = path_ + "/" + name;
    const int fd = open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (ftruncate(fd, size) != 0) ADD_FAILURE() << "ftruncate " << p;
    close(fd);
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------------------------
// The command line. The kernel is an empty file: an option the parser accepts then ends in the
// kernel's error (4), one it rejects in a usage error (2) before any file is read.

struct CliCase {
  std::vector<std::string> args;
  int code;
};

std::vector<CliCase> cli_cases() {
  const std::string huge_number = "99999999999999999999999999";
  const std::string long_text(100'000, 'x');  // under MAX_ARG_STRLEN (128 KiB)
  std::vector<CliCase> c;
  // Options whose value is a number: empty, negative, zero where it is out of range, huge,
  // non-numeric, fractional where an integer is meant.
  for (const std::string& opt :
       std::vector<std::string>{"--duration", "--min-delta-ns", "--periodic-hz", "--timer-slack"}) {
    for (const std::string& v :
         std::vector<std::string>{"", "-1", huge_number, "abc", "1e400", "nan", "0x", " "}) {
      c.push_back({{opt + "=" + v}, kUsage});
    }
  }
  c.push_back({{"--duration=-0.5"}, kUsage});
  c.push_back({{"--duration=1e8"}, kUsage});
  c.push_back({{"--duration=inf"}, kUsage});
  c.push_back({{"--min-delta-ns=999"}, kUsage});
  c.push_back({{"--min-delta-ns=1.5"}, kUsage});
  c.push_back({{"--periodic-hz=0"}, kUsage});
  c.push_back({{"--periodic-hz=100001"}, kUsage});
  c.push_back({{"--timer-slack=0"}, kUsage});
  c.push_back({{"--timer-slack=1000000001"}, kUsage});
  // Sizes.
  for (const std::string& v :
       std::vector<std::string>{"", "-1", "-64M", huge_number, "64Q", "M", "0", "100", "4097",
                                "3G1", "4G", "1T", "abc", "64 M", long_text}) {
    c.push_back({{"--memory=" + v}, kUsage});
  }
  // Enumerations: empty, wrong case, unknown, a near miss, very long.
  for (const std::string& opt :
       std::vector<std::string>{"--pit", "--pit-tick", "--alarm", "--poll", "--lost-ticks", "--cpu",
                                "--irq-inject", "--log-level"}) {
    for (const std::string& v : std::vector<std::string>{"", "USER", "nonsense", "-1", long_text}) {
      c.push_back({{opt + "=" + v}, kUsage});
    }
  }
  for (const std::string& v :
       std::vector<std::string>{"", "nonsense", "cx16,nonsense", ",", long_text}) {
    c.push_back({{"--cpuid-mask=" + v}, kUsage});
  }
  // Flags given a value, unknown options, stray words, a repeated option.
  c.push_back({{"--quiet=maybe"}, kUsage});
  c.push_back({{"--no-console-input=x"}, kUsage});
  c.push_back({{"--no-such-option"}, kUsage});
  c.push_back({{"stray"}, kUsage});
  c.push_back({{"--memory"}, kUsage});  // missing value
  c.push_back({{"--memory=64M", "--memory=128M"}, kUsage});
  // Conflicts.
  c.push_back({{"--pit=kvm", "--pit-tick=vcpu"}, kUsage});
  c.push_back({{"--pit=kvm", "--pit-tick=loop"}, kUsage});
  // --stats to somewhere it cannot be written: judged before the run, not lost after it.
  c.push_back({{"--stats=/nonexistent-dir/stats.json"}, kUsage});
  c.push_back({{"--stats=/tmp"}, kUsage});
  // `--opt=` with nothing after '=' is a missing value, for text options too.
  for (const std::string& opt :
       std::vector<std::string>{"--cmdline", "--initrd", "--api-socket", "--stats"}) {
    c.push_back({{opt + "="}, kUsage});
  }
  // A path given empty is a mistake, not "none" (issue 20): the socket and the report.
  c.push_back({{"--api-socket", ""}, kUsage});
  c.push_back({{"--stats", ""}, kUsage});
  // Accepted values: the empty kernel is what fails. An empty word means "none".
  c.push_back({{"--initrd", ""}, kBadKernel});
  c.push_back({{"--cmdline", ""}, kBadKernel});
  c.push_back({{"--duration=0"}, kBadKernel});
  c.push_back({{"--pit=kvm"}, kBadKernel});
  c.push_back({{"--cpuid-mask=cx16,xsave"}, kBadKernel});
  c.push_back({{"--quiet", "--interactive", "--no-console-input"}, kBadKernel});
  return c;
}

TEST(BadInputMatrixTest, EveryOptionWithBadValues) {
  TempDir dir;
  const std::string empty = dir.file("empty", {});
  for (const CliCase& cc : cli_cases()) {
    std::vector<std::string> args{"run", "--kernel", empty};
    args.insert(args.end(), cc.args.begin(), cc.args.end());
    std::string what;
    for (const auto& a : cc.args) what += (a.size() > 40 ? a.substr(0, 40) + "..." : a) + " ";
    expect_one_line_error(run(args), cc.code, what);
  }
  // The subcommand and --kernel themselves.
  expect_one_line_error(run({}), kUsage, "no subcommand");
  expect_one_line_error(run({"run"}), kUsage, "no --kernel");
  expect_one_line_error(run({"run", "--kernel="}), kUsage, "--kernel=");
  expect_one_line_error(run({"run", "--kernel", ""}), kBadKernel, "--kernel ''");
  expect_one_line_error(run({"fly", "--kernel", empty}), kUsage, "unknown subcommand");
}

// ---------------------------------------------------------------------------------------------
// Kernel images.

std::vector<std::byte> bzimage() { return make_bzimage(BzImageSpec{}); }

// A PVH vmlinux: two PT_LOADs and the Xen note with the 32-bit entry.
std::vector<std::byte> pvh_elf() {
  ElfSpec spec;
  spec.entry = 0xffffffff81000000;
  spec.segments = {
      {1, 0x1000000, pattern_bytes(0x2000, 3), 0, 0x200000},
      {1, 0x1200000, pattern_bytes(0x800, 5), 0x3000, 0x200000},
      {4, 0, make_note("Xen", 18, le_bytes<std::uint32_t>(0x1000040)), 0, 4},
  };
  return make_elf(spec);
}

// A multiboot ELF32 (the kvm-unit-tests shape): the header at the start of the text segment.
constexpr std::size_t kMultibootHeaderOffset = 128;  // ehdr + 2 phdrs (116), 16-aligned
std::vector<std::byte> multiboot_elf() {
  auto text = pattern_bytes(0x1000, 9);
  put<std::uint32_t>(text, 0, 0x1badb002);
  put<std::uint32_t>(text, 4, 0x3);
  put<std::uint32_t>(text, 8, 0u - 0x1badb002u - 0x3u);
  ElfSpec spec;
  spec.is64 = false;
  spec.machine = 3;
  spec.entry = 0x400020;
  spec.segments = {{1, 0x400000, text, 0, 0x1000},
                   {1, 0x410000, pattern_bytes(0x100, 4), 0x5000, 0x1000}};
  auto img = make_elf(spec);
  std::uint32_t magic = 0;
  std::memcpy(&magic, img.data() + kMultibootHeaderOffset, 4);
  EXPECT_EQ(magic, 0x1badb002u);
  return img;
}

struct ImageCase {
  std::string name;
  std::vector<std::byte> bytes;
};

std::vector<std::byte> truncated(const std::vector<std::byte>& img, std::size_t n) {
  return {img.begin(), img.begin() + static_cast<std::ptrdiff_t>(std::min(n, img.size()))};
}

// Every header boundary of the three formats, and one byte either side of it.
std::vector<ImageCase> truncations() {
  std::vector<ImageCase> out;
  auto add = [&](const std::string& fmt, const std::vector<std::byte>& img,
                 std::vector<std::size_t> cuts) {
    for (std::size_t cut : cuts) {
      for (std::size_t n : {cut - 1, cut, cut + 1}) {
        if (n == 0 || n >= img.size()) continue;
        out.push_back({fmt + " cut at " + std::to_string(n), truncated(img, n)});
      }
    }
  };
  const auto bz = bzimage();
  // boot.rst: setup_sects 0x1f1, syssize 0x1f4, boot_flag 0x1fe, jump 0x200, "HdrS" 0x202,
  // version 0x206, loadflags 0x211, code32_start 0x214, initrd_addr_max 0x22c, xloadflags
  // 0x236, cmdline_size 0x238, pref_address 0x258, init_size 0x260, end of the 2.15 header
  // 0x26c (+ handover 0x264), end of the setup sectors, one payload paragraph, the last byte.
  add("bzImage", bz,
      {1,
       0x1f1,
       0x1f2,
       0x1f4,
       0x1fe,
       0x200,
       0x202,
       0x206,
       0x208,
       0x211,
       0x214,
       0x22c,
       0x236,
       0x238,
       0x258,
       0x260,
       0x264,
       0x268,
       0x26c,
       vmm::testing::setup_size_of(BzImageSpec{}),
       vmm::testing::setup_size_of(BzImageSpec{}) + 16,
       bz.size() - 1});
  const auto pvh = pvh_elf();
  // ELF64: e_ident 16, e_type..e_version 24, e_entry 32, e_phoff 40, e_phnum 58, ehdr 64, each
  // 56-byte phdr, then each segment's data (16-aligned, in order) to the end.
  std::vector<std::size_t> pvh_cuts{4, 16, 24, 32, 40, 58, 64, 64 + 56, 64 + 112, 64 + 168};
  pvh_cuts.push_back(0xc0 + 0x1000);   // inside the first segment
  pvh_cuts.push_back(pvh.size() - 8);  // inside the note
  add("PVH ELF64", pvh, pvh_cuts);
  const auto mb = multiboot_elf();
  // ELF32: e_ident 16, e_entry 24, e_phoff 28, e_phnum 44, ehdr 52, each 32-byte phdr, the
  // multiboot magic, flags and checksum, then the segments.
  add("multiboot ELF32", mb,
      {4, 16, 24, 28, 44, 52, 52 + 32, 52 + 64, kMultibootHeaderOffset + 4,
       kMultibootHeaderOffset + 8, kMultibootHeaderOffset + 12, kMultibootHeaderOffset + 0x800,
       mb.size() - 1});
  return out;
}

std::vector<ImageCase> bad_images() {
  std::vector<ImageCase> out = truncations();
  out.push_back({"empty", {}});
  out.push_back({"one byte", {std::byte{0x7f}}});
  out.push_back({"8 KiB of text", std::vector<std::byte>(8192, std::byte{'x'})});
  auto bz = bzimage();
  put<std::uint32_t>(bz, 0x202, 0x12345678);
  out.push_back({"bzImage with bad HdrS magic", bz});
  bz = bzimage();
  put<std::uint16_t>(bz, 0x1fe, 0);
  out.push_back({"bzImage with bad boot flag", bz});
  bz = bzimage();
  put<std::uint16_t>(bz, 0x206, 0x0100);
  out.push_back({"bzImage of boot protocol 1.0", bz});
  bz = bzimage();
  put<std::uint8_t>(bz, 0x1f1, 0xff);  // setup sectors beyond the file
  out.push_back({"bzImage with setup_sects past the end", bz});
  auto elf = pvh_elf();
  elf[1] = std::byte{'X'};
  out.push_back({"ELF with bad magic", elf});
  elf = pvh_elf();
  put<std::uint16_t>(elf, 56, 0xffff);  // e_phnum far past the file
  out.push_back({"ELF with e_phnum 65535", elf});
  elf = pvh_elf();
  put<std::uint64_t>(elf, 32, 0xfffffffffffffff0ull);  // e_phoff overflowing
  out.push_back({"ELF with e_phoff near 2^64", elf});
  auto mb = multiboot_elf();
  put<std::uint32_t>(mb, kMultibootHeaderOffset + 8, 0);
  out.push_back({"multiboot with a bad checksum", mb});
  return out;
}

TEST(BadInputMatrixTest, BadKernelImagesInProcessLeakNoFd) {
  // Sanity: the untruncated images load, so each failure below is the damage's doing.
  for (const auto& good : {bzimage(), pvh_elf(), multiboot_elf()}) {
    vmm::GuestRamMapping ram(64ull << 20);
    EXPECT_NO_THROW(vmm::load_guest_kernel(ram.memory(), good, "", {}));
  }
  TempDir dir;
  for (const ImageCase& ic : bad_images()) {
    const std::string path = dir.file("kernel", ic.bytes);
    const int fds = open_fds();
    try {
      const auto image = vmm::MappedFile::open("--kernel", path, vmm::ExitCode::kBadKernel,
                                                {3ull << 30, vmm::ExitCode::kBadKernel, "3 GiB"});
      vmm::GuestRamMapping ram(64ull << 20);
      vmm::load_guest_kernel(ram.memory(), image.bytes(), "", {});
      ADD_FAILURE() << ic.name << ": accepted";
    } catch (const vmm::VmmError& e) {
      EXPECT_EQ(e.code(), vmm::ExitCode::kBadKernel) << ic.name << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << ic.name;
    }
    EXPECT_EQ(open_fds(), fds) << ic.name;
  }
}

TEST(BadInputMatrixTest, BadKernelImagesFromTheCommandLine) {
  TempDir dir;
  for (const ImageCase& ic : bad_images()) {
    const std::string path = dir.file("kernel", ic.bytes);
    expect_one_line_error(run({"run", "--kernel", path}), kBadKernel, ic.name);
  }
}

TEST(BadInputMatrixTest, KernelFilesThatAreNotImages) {
  TempDir dir;
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Nobody writes to the FIFO: opening or reading it must not hang (the run's deadline).
  expect_one_line_error(run({"run", "--kernel", fifo}), kBadKernel, "a FIFO");
  expect_one_line_error(run({"run", "--kernel", dir.path()}), kBadKernel, "a directory");
  expect_one_line_error(run({"run", "--kernel", "/dev/null"}), kBadKernel, "a character device");
  expect_one_line_error(run({"run", "--kernel", dir.path() + "/missing"}), kBadKernel, "missing");
  expect_one_line_error(run({"run", "--kernel", dir.path() + "/empty/x"}), kBadKernel,
                        "under a missing folder");
  const std::string link = dir.path() + "/loop";
  ASSERT_EQ(symlink(link.c_str(), link.c_str()), 0);
  expect_one_line_error(run({"run", "--kernel", link}), kBadKernel, "a symlink loop");
  // Oversize: bigger than guest RAM (sparse, so it costs no disk), and bigger than any RAM.
  const auto bz = bzimage();
  std::vector<std::byte> big(bz);
  big.resize(80ull << 20);
  // syssize covers it all: the loader ignores bytes past syssize, as trailing data.
  put<std::uint32_t>(
      big, 0x1f4,
      static_cast<std::uint32_t>((big.size() - vmm::testing::setup_size_of(BzImageSpec{})) / 16));
  // A good image that needs more RAM names --memory, not a bad image (issue 20).
  expect_one_line_error(run({"run", "--kernel", dir.file("big", big), "--memory=64M"}), kUsage,
                        "a kernel bigger than RAM");
  expect_one_line_error(run({"run", "--kernel", dir.sparse("huge", (3ll << 30) + 1)}), kBadKernel,
                        "a kernel over 3 GiB");
}

TEST(BadInputMatrixTest, UnreadableKernel) {
  TempDir dir;
  const std::string path = dir.file("kernel", bzimage());
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  if (geteuid() == 0) {
    // Root reads a mode-000 file anyway (CAP_DAC_OVERRIDE), so the permission error cannot
    // happen to root. Check it as an unprivileged user instead: a forked child drops to
    // nobody (65534) and calls the reader the binary uses.
    const pid_t pid = fork();
    if (pid == 0) {
      if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(99);
      try {
        vmm::MappedFile::open("--kernel", path, vmm::ExitCode::kBadKernel,
                              {3ull << 30, vmm::ExitCode::kBadKernel, "3 GiB"});
      } catch (const vmm::VmmError& e) {
        const bool ok = e.code() == vmm::ExitCode::kBadKernel &&
                        std::strstr(e.what(), "Permission denied") != nullptr;
        _exit(ok ? 0 : 2);
      }
      _exit(3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 99) GTEST_SKIP() << "cannot drop to uid 65534 to test EACCES";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "MappedFile::open did not report EACCES as kBadKernel";
    return;
  }
  expect_one_line_error(run({"run", "--kernel", path}), kBadKernel, "mode 000");
}

TEST(BadInputMatrixTest, Initrds) {
  TempDir dir;
  const std::string kernel = dir.file("kernel", bzimage());
  // Bigger than the 64 MiB of RAM (sparse): placed nowhere, a one-line error naming --memory,
  // judged from fstat before a byte of it is read.
  expect_one_line_error(
      run({"run", "--kernel", kernel, "--initrd", dir.sparse("initrd", 80ll << 20)}), kUsage,
      "an initrd bigger than RAM");
  // Fits in RAM but not beside the kernel below initrd_addr_max / the top of RAM.
  expect_one_line_error(run({"run", "--kernel", kernel, "--memory=32M", "--initrd",
                             dir.sparse("initrd2", 31ll << 20)}),
                        kUsage, "an initrd that does not fit beside the kernel");
  expect_one_line_error(run({"run", "--kernel", kernel, "--initrd", dir.path()}), kBadKernel,
                        "an initrd that is a directory");
  expect_one_line_error(run({"run", "--kernel", kernel, "--initrd", dir.path() + "/none"}),
                        kBadKernel, "a missing initrd");
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_one_line_error(run({"run", "--kernel", kernel, "--initrd", fifo}), kBadKernel,
                        "an initrd that is a FIFO");
}

// ---------------------------------------------------------------------------------------------
// Control socket paths. The kernel is valid, so these run with a real image; the socket is
// bound before /dev/kvm is opened.

TEST(BadInputMatrixTest, ControlSocketPaths) {
  TempDir dir;
  const std::string kernel = dir.file("kernel", bzimage());
  // A regular file at the path is the user's data, not a stale socket: refused, left alone.
  const std::string file = dir.file("notasocket", pattern_bytes(16, 1));
  expect_one_line_error(run({"run", "--kernel", kernel, "--api-socket", file}), kUsage,
                        "an existing regular file");
  struct stat st {};
  EXPECT_EQ(stat(file.c_str(), &st), 0) << "the file was removed";
  EXPECT_EQ(st.st_size, 16);
  expect_one_line_error(run({"run", "--kernel", kernel, "--api-socket", dir.path()}), kUsage,
                        "an existing directory");
  expect_one_line_error(
      run({"run", "--kernel", kernel, "--api-socket", dir.path() + "/missing/api.sock"}), kUsage,
      "a missing folder");
  expect_one_line_error(
      run({"run", "--kernel", kernel, "--api-socket", dir.path() + "/" + std::string(120, 's')}),
      kUsage, "longer than sun_path");
  // A live socket (someone listens) is another VMM's: refused, not stolen.
  const std::string live = dir.path() + "/live.sock";
  const int listener = unix_bind(live, 1);
  ASSERT_GE(listener, 0) << std::strerror(errno);
  expect_one_line_error(run({"run", "--kernel", kernel, "--api-socket", live}), kUsage,
                        "a live socket");
  close(listener);
}

TEST(BadInputMatrixTest, ControlSocketRefusalsLeakNoFd) {
  TempDir dir;
  timers::MonotonicClock mono;
  timers::TimerList rt_timers{timers::ClockType::kRt, mono};
  timers::PollTimeoutAlarm alarm;
  timers::Dynticks dynticks{alarm, mono, {&rt_timers}};
  loop::EventLoop loop{loop::make_poller(loop::PollerKind::kEpoll), dynticks};
  const std::string file = dir.file("file", {});
  for (const std::string& path : {std::string(), file, dir.path(), dir.path() + "/missing/x.sock",
                                  dir.path() + "/" + std::string(200, 'p')}) {
    const int fds = open_fds();
    EXPECT_ANY_THROW(vmm::ControlSocket(loop, rt_timers, path, {})) << path;
    EXPECT_EQ(open_fds(), fds) << path;
  }
}

}  // namespace
}  // namespace minivmm::testing
