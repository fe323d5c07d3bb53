// minivmm: command line, logging, and the process exit code. Everything else is in Machine.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "devices/log/log.h"
#include "vmm/host/crash_signals.h"
#include "vmm/machine/machine.h"
#include "vmm/host/output_file.h"
#include "vmm/cli/size_parser.h"
#include "vmm/machine/virtio_mmio_devices.h"
#include "vmm/snapshot/snapshot_config.h"
#include "vmm/snapshot/snapshot_file.h"
#include "vmm/testrun/test_cli.h"
#include "vmm/cli/exec_cli.h"
#include "devices/bus/device_state.h"
#include "vmm/vmm_error.h"

namespace {

using minivmm::vmm::Config;
using minivmm::vmm::ExitCode;
using minivmm::vmm::to_int;

template <typename Enum, typename Parse>
CLI::Validator enum_validator(Parse parse, const char* what) {
  return CLI::Validator(
      [parse, what](std::string& s) -> std::string {
        if (parse(s)) return "";
        return std::string("unknown ") + what + " '" + s + "'";
      },
      "", what);
}

// The report, whole, to the --stats target; a failure is said, not swallowed.
bool write_stats(const minivmm::vmm::RunReport& report, minivmm::vmm::OutputFile& out) {
  std::string why;
  if (out.write(report.to_json().dump(2) + "\n", why)) return true;
  minivmm::log::error("--stats: cannot write the report to '{}': {}", out.path(), why);
  return false;
}

// A standard fd the caller left closed (`minivmm ... >&-`) would be taken by the next open():
// the guest console or the --stats report would then be written into /dev/kvm or an eventfd.
// Each closed one is plugged with /dev/null; the return says which were closed.
std::array<bool, 3> plug_closed_std_fds() {
  std::array<bool, 3> closed{};
  for (int fd = 0; fd < 3; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    closed[static_cast<std::size_t>(fd)] = true;
    const int plug = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);  // lowest free: fd
    if (plug >= 0 && plug != fd) ::close(plug);
  }
  return closed;
}

}  // namespace

int main(int argc, char** argv) {
  const std::array<bool, 3> closed_std_fds = plug_closed_std_fds();
  // Console output piped into `head` must not kill the VMM; the sink counts EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);
  // After SIGPIPE is ignored: a crash, or any other signal that ends the process, gives the
  // terminal back first.
  minivmm::vmm::install_crash_signal_handlers();
  // Logs go to stderr: stdout is the guest's console. Through the logging front end, so that
  // this file need not include spdlog (devices/log/log.h says why).
  minivmm::log::use_stderr_logger("minivmm", "minivmm: %^%l%$: %v");

  CLI::App app{"minivmm: a small KVM virtual machine monitor whose idle guests cost the host "
               "almost nothing"};
  app.set_version_flag("--version", std::string("minivmm 0.1.0"));
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));

  Config c;
  std::string memory = "64M";
  std::string pit = "user";
  std::string alarm = std::string(minivmm::timers::alarm_kind_name(c.alarm));
  std::string poll = std::string(minivmm::loop::poller_kind_name(c.poller));
  std::string lost = "delay";
  std::string cpu = "baseline";
  double duration = 0;
  std::int64_t timer_slack = -1;

  CLI::App* run = app.add_subcommand("run", "boot a kernel and run it");
  run->add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  run->add_option("--kernel", c.kernel_path, "bzImage or PVH vmlinux to boot");
  std::string restore_path;
  run->add_option("--restore", restore_path,
                  "start from a snapshot (the control socket's \"snapshot\" command) instead of "
                  "booting: no --kernel; what the guest sees comes from the snapshot "
                  "(docs/snapshot.md)");
  std::vector<std::string> restore_drives;
  run->add_option("--restore-drive", restore_drives,
                  "with --restore: N=PATH gives the snapshot's drive N another file of the same "
                  "size (a clone's own copy); repeatable");
  std::string mailbox;
  run->add_option("--mailbox", mailbox,
                  "with --restore: GPA,SIZE (page-aligned, bytes or hex) of guest memory that "
                  "{\"cmd\":\"reset\"} leaves alone and {\"cmd\":\"mailbox\"} reads and writes "
                  "(docs/snapshot.md)");
  run->add_option("--reset-on-exit", c.reset_rounds,
                  "with --restore: the guest's first N exits (debug-exit, reset, power-off, "
                  "panic) reset it to the snapshot instead of ending the run (docs/snapshot.md)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}));
  run->add_option("--initrd", c.initrd_path, "initial ramdisk");
  run->add_option("--cmdline", c.cmdline, "kernel command line");
  run->add_option("--memory", memory, "guest RAM, e.g. 64M, 1G (max 3G)")->capture_default_str();
  std::string cpus = "1";
  run->add_option("--cpus", cpus,
                  "vCPUs, 1.." + std::to_string(minivmm::vmm::kMaxVcpus) +
                      ": vCPU 0 boots the kernel, the others wait for the guest's INIT/SIPI")
      ->capture_default_str();
  run->add_option("--pit", pit, "i8254 PIT: user (minivmm's) or kvm (in-kernel baseline)")
      ->check(CLI::IsMember({"user", "kvm"}))
      ->capture_default_str();
  std::string pit_tick = "kernel";
  run->add_option("--pit-tick", pit_tick,
                  "who delivers the user PIT's periodic ticks: loop (an alarm wakes the loop, "
                  "which raises IRQ0), vcpu (a timer signal interrupts KVM_RUN) or kernel "
                  "(edges armed ahead on host timers that signal an irqfd; the least host CPU, "
                  "so the default)")
      ->check(CLI::IsMember({"loop", "vcpu", "kernel"}))
      ->capture_default_str();
  run->add_option("--duration", duration, "stop after this many seconds (0: run until the guest exits)")
      ->check(CLI::Range(0.0, 1e7));
  run->add_option("--stats", c.stats_path, "write run statistics as JSON to FILE, or - for stdout");
  run->add_flag("--quiet", c.quiet_summary, "do not print the summary on stderr");
  run->add_option("--alarm", alarm, "host alarm: dynticks, timerfd, ppoll, periodic")
      ->check(enum_validator<int>(minivmm::timers::parse_alarm_kind, "alarm"))
      ->capture_default_str();
  run->add_option("--poll", poll, "wait primitive: ppoll, epoll, timerfd-epoll, auto (measures and switches)")
      ->check(enum_validator<int>(minivmm::loop::parse_poller_kind, "poll backend"))
      ->capture_default_str();
  run->add_option("--min-delta-ns", c.min_delta_ns, "shortest host alarm distance")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{100'000'000}))
      ->capture_default_str();
  run->add_option("--periodic-hz", c.periodic_alarm_hz, "rate of --alarm periodic")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000}))
      ->capture_default_str();
  run->add_option("--timer-slack", timer_slack, "PR_SET_TIMERSLACK for the loop thread, in ns")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000}));
  run->add_option("--lost-ticks", lost, "PIT lost-tick policy: delay or discard")
      ->check(CLI::IsMember({"delay", "discard"}))
      ->capture_default_str();
  run->add_option("--cpu", cpu, "CPUID model: baseline or host")
      ->check(CLI::IsMember({"baseline", "host"}))
      ->capture_default_str();
  run->add_option("--cpuid-mask", c.cpuid_mask, "CPUID features to hide, e.g. cx16,xsave")
      ->delimiter(',');
  run->add_option("--api-socket", c.api_socket, "control socket path");
  run->add_flag("--interactive", c.interactive,
                "raw terminal for the guest console (Ctrl-A x quits, Ctrl-A Ctrl-A sends Ctrl-A)");
  std::string irq_inject = "auto";
  run->add_option("--irq-inject", irq_inject,
                  "how PIT ticks reach KVM: irqfd (1 syscall, a kernel worker injects), ioctl "
                  "(KVM_IRQ_LINE up and down: 2 syscalls, injected by the calling thread) or "
                  "auto (irqfd from the loop thread, ioctl from the vCPU thread)")
      ->check(CLI::IsMember({"auto", "irqfd", "ioctl"}))
      ->capture_default_str();
  bool no_input = false;
  std::vector<std::string> drives;
  run->add_option("--drive", drives,
                  "virtio-blk disk: FILE[,ro][,aio=io_uring|threads] (repeatable; aio: io_uring "
                  "where the kernel allows it, else a worker thread)");
  std::vector<std::string> nets;
  run->add_option("--net", nets,
                  "virtio-net NIC: tap=IFNAME[,mac=M] (an existing TAP interface), tap-fd=N[,mac=M] "
                  "(a TAP descriptor passed in) or user[,hostfwd=PROTO:[HOSTADDR]:HOSTPORT-"
                  "[GUESTADDR]:GUESTPORT]...[,mac=M] (user-mode networking, libslirp); repeatable");
  std::vector<std::string> shares;
  run->add_option("--share", shares,
                  "virtio-9p share: HOSTDIR[,ro] (repeatable; mount tags share0, share1, ... "
                  "in order; docs/9p.md)");
  std::string console = "serial";
  run->add_option("--console", console, "guest console: serial (COM1) or virtio (virtio-console)")
      ->check(CLI::IsMember({"serial", "virtio"}))
      ->capture_default_str();
  run->add_flag("--no-console-input", no_input, "do not forward stdin to the guest's COM1");
  run->add_flag("--testdev", c.testdev,
                "add kvm-unit-tests' devices, QEMU's fw_cfg (port 0x510) and pc-testdev (ports "
                "0xe0-0xeb, 0x2000-0x2017 driving GSIs 0-23, MMIO 0xff000000)");
  std::string seccomp = "on";
  run->add_option("--seccomp", seccomp,
                  "per-thread syscall allow-lists: on (a forbidden syscall ends the run with "
                  "exit code 14), log (allowed, written to the kernel's audit log) or off")
      ->check(enum_validator<int>(minivmm::vmm::parse_seccomp_mode, "seccomp mode"))
      ->capture_default_str();
  // Hidden (group ""): a test hook, not a feature. The named thread kind makes a forbidden
  // syscall as soon as its filter is in place, so the tests can prove each kind is filtered
  // and reported (tests/integration/seccomp_test.cc).
  std::string seccomp_selftest;
  run->add_option("--seccomp-selftest", seccomp_selftest,
                  "test hook: loop, vcpu, signals or blk makes a forbidden syscall")
      ->group("");
  std::string cpu_affinity;
  run->add_option("--cpu-affinity", cpu_affinity,
                  "pin threads to host CPUs: loop=CPU,vcpu=CPU (a CPU or a range a-b each; "
                  "default: not pinned)");

  // `minivmm test`: suites of boot tests, each test a `minivmm run` child (vmm/testrun/).
  minivmm::testrun::TestCommandOptions test_options;
  CLI::App* test = minivmm::testrun::add_test_subcommand(app, test_options);
  // `minivmm exec`: one host command in a booted kernel (vmm/exec/, vmm/cli/exec_command.cc).
  minivmm::vmm::exec::ExecCommandOptions exec_options;
  CLI::App* exec = minivmm::vmm::exec::add_exec_subcommand(app, exec_options);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error: scripts grep the first line of stderr.
    std::fprintf(stderr, "minivmm: error: %s (see 'minivmm %s --help')\n", e.what(),
                 test->parsed() ? "test" : exec->parsed() ? "exec" : "run");
    return to_int(ExitCode::kUsage);
  }
  minivmm::log::set_level(minivmm::log::level_from_name(log_level));
  if (test->parsed()) return minivmm::testrun::run_test_command(test_options);
  if (exec->parsed()) return minivmm::vmm::exec::run_exec_command(exec_options);

  const bool restoring = run->count("--restore") > 0;
  if (!restoring && run->count("--kernel") == 0) {
    std::fprintf(stderr, "minivmm: error: --kernel is required (or --restore a snapshot) (see "
                         "'minivmm run --help')\n");
    return to_int(ExitCode::kUsage);
  }
  if (restoring) {
    // A run with a share refuses snapshots (docs/9p.md), so no snapshot has one to restore.
    for (const char* o : {"--kernel", "--initrd", "--cmdline", "--share"}) {
      if (run->count(o) > 0) {
        std::fprintf(stderr, "minivmm: error: %s: a restored guest is not booted (leave it out "
                             "with --restore)\n", o);
        return to_int(ExitCode::kUsage);
      }
    }
    if (restore_path.empty()) {
      std::fprintf(stderr, "minivmm: error: --restore: the path is empty\n");
      return to_int(ExitCode::kUsage);
    }
  } else if (!restore_drives.empty()) {
    std::fprintf(stderr, "minivmm: error: --restore-drive is for --restore\n");
    return to_int(ExitCode::kUsage);
  } else if (c.reset_rounds > 0) {
    std::fprintf(stderr, "minivmm: error: --reset-on-exit is for --restore (a reset goes back "
                         "to the snapshot it was restored from)\n");
    return to_int(ExitCode::kUsage);
  } else if (!mailbox.empty()) {
    std::fprintf(stderr, "minivmm: error: --mailbox is for --restore (a reset goes back to "
                         "the snapshot it was restored from)\n");
    return to_int(ExitCode::kUsage);
  }
  if (!mailbox.empty()) {
    const auto range = minivmm::vmm::parse_mailbox(mailbox);
    if (!range) {
      std::fprintf(stderr, "minivmm: error: --mailbox: '%s' is not GPA,SIZE with both "
                           "page-aligned and SIZE > 0 (e.g. 0x200000,4096)\n",
                   minivmm::vmm::one_line(mailbox).c_str());
      return to_int(ExitCode::kUsage);
    }
    c.mailbox_gpa = range->first;
    c.mailbox_bytes = range->second;
  }
  const auto mem = minivmm::vmm::parse_size(memory);
  if (!mem) {
    std::fprintf(stderr, "minivmm: error: --memory: '%s' is not a size (try 64M or 1G)\n",
                 memory.c_str());
    return to_int(ExitCode::kUsage);
  }
  c.memory_bytes = *mem;
  {
    // By hand rather than CLI::Range: one line, naming the limit, for every bad spelling.
    std::uint64_t n = 0;
    bool ok = !cpus.empty() && cpus.size() <= 6;
    for (const char ch : cpus) {
      ok = ok && ch >= '0' && ch <= '9';
      if (ok) n = n * 10 + static_cast<std::uint64_t>(ch - '0');
    }
    if (!ok || n < 1 || n > minivmm::vmm::kMaxVcpus) {
      std::fprintf(stderr, "minivmm: error: --cpus: '%s' is not a vCPU count from 1 to %u\n",
                   cpus.c_str(), minivmm::vmm::kMaxVcpus);
      return to_int(ExitCode::kUsage);
    }
    c.cpus = static_cast<std::uint32_t>(n);
  }
  if (pit == "kvm" && run->count("--pit-tick") > 0) {
    std::fprintf(stderr, "minivmm: error: --pit-tick: KVM's in-kernel PIT (--pit kvm) delivers its "
                         "own ticks; --pit-tick applies to --pit user\n");
    return to_int(ExitCode::kUsage);
  }
  c.pit = pit == "kvm" ? minivmm::vmm::PitMode::kKvm : minivmm::vmm::PitMode::kUser;
  c.pit_tick = pit_tick == "vcpu"     ? minivmm::vmm::PitTick::kVcpu
               : pit_tick == "kernel" ? minivmm::vmm::PitTick::kHostKernel
                                      : minivmm::vmm::PitTick::kLoop;
  c.alarm = *minivmm::timers::parse_alarm_kind(alarm);
  c.poller = *minivmm::loop::parse_poller_kind(poll);
  c.lost_ticks = lost == "discard" ? minivmm::devices::LostTickPolicy::kDiscard
                                   : minivmm::devices::LostTickPolicy::kDelay;
  c.cpu = *minivmm::vmm::parse_cpu_model(cpu);
  // Checked here, not when KVM's CPUID is filtered: user input is judged before /dev/kvm.
  for (const std::string& name : c.cpuid_mask) {
    const auto& known = minivmm::vmm::known_cpuid_features();
    if (std::none_of(known.begin(), known.end(),
                     [&](const minivmm::vmm::CpuidFeature& f) { return f.name == name; })) {
      std::fprintf(stderr, "minivmm: error: --cpuid-mask: unknown CPUID feature '%s'\n",
                   name.c_str());
      return to_int(ExitCode::kUsage);
    }
  }
  // CLI::Range lets NaN through (every comparison with it is false).
  if (std::isnan(duration)) {
    std::fprintf(stderr, "minivmm: error: --duration: not a number\n");
    return to_int(ExitCode::kUsage);
  }
  if (duration > 0) c.duration_s = duration;
  c.console_input = !no_input;
  if (irq_inject != "auto") c.irq_inject_ioctl = irq_inject == "ioctl";
  if (timer_slack > 0) c.timer_slack_ns = timer_slack;
  if (run->count("--cpu-affinity") > 0) {
    std::string why;
    const auto affinity =
        minivmm::vmm::parse_cpu_affinity(cpu_affinity, minivmm::vmm::allowed_cpus(), why);
    if (!affinity) {
      std::fprintf(stderr, "minivmm: error: --cpu-affinity: %s\n", why.c_str());
      return to_int(ExitCode::kUsage);
    }
    c.cpu_affinity = *affinity;
  }

  c.virtio_console = console == "virtio";
  c.seccomp = *minivmm::vmm::parse_seccomp_mode(seccomp);
  if (!seccomp_selftest.empty()) {
    c.seccomp_selftest = minivmm::vmm::parse_thread_kind(seccomp_selftest);
    if (!c.seccomp_selftest) {
      std::fprintf(stderr,
                   "minivmm: error: --seccomp-selftest: unknown thread kind '%s' (loop, vcpu, "
                   "signals, blk or 9p)\n",
                   seccomp_selftest.c_str());
      return to_int(ExitCode::kUsage);
    }
  }
  for (const std::string& spec : drives) {
    std::string why;
    const auto d = minivmm::vmm::parse_drive_spec(spec, why);
    if (!d) {
      std::fprintf(stderr, "minivmm: error: --drive: %s\n", why.c_str());
      return to_int(ExitCode::kUsage);
    }
    c.drives.push_back(*d);
  }
  for (const std::string& spec : nets) {
    std::string why;
    const auto n = minivmm::vmm::parse_net_spec(spec, why);
    if (!n) {
      std::fprintf(stderr, "minivmm: error: --net: %s\n", why.c_str());
      return to_int(ExitCode::kUsage);
    }
    c.nets.push_back(*n);
  }
  for (const std::string& spec : shares) {
    std::string why;
    const auto sh = minivmm::vmm::parse_share_spec(spec, c.shares.size(), why);
    if (!sh) {
      std::fprintf(stderr, "minivmm: error: --share: %s\n", why.c_str());
      return to_int(ExitCode::kUsage);
    }
    c.shares.push_back(*sh);
  }
  // libslirp keeps global state: one user-mode network per process.
  if (std::count_if(c.nets.begin(), c.nets.end(), [](const minivmm::vmm::NetSpec& n) {
        return n.kind == minivmm::vmm::NetSpec::Kind::kUser;
      }) > 1) {
    std::fprintf(stderr, "minivmm: error: --net: at most one user-mode network (--net user)\n");
    return to_int(ExitCode::kUsage);
  }
  if (c.virtio_devices() > minivmm::vmm::VirtioMmioDevices::kMaxDevices) {
    std::fprintf(stderr,
                 "minivmm: error: --drive, --net, --share, --console virtio: at most %zu virtio "
                 "devices\n",
                 minivmm::vmm::VirtioMmioDevices::kMaxDevices);
    return to_int(ExitCode::kUsage);
  }

  if (run->count("--api-socket") > 0 && c.api_socket.empty()) {
    std::fprintf(stderr, "minivmm: error: --api-socket: the path is empty\n");
    return to_int(ExitCode::kUsage);
  }

  std::optional<minivmm::vmm::SnapshotFile> snapshot;
  if (restoring) {
    std::vector<std::pair<std::size_t, std::string>> renamed;
    for (const std::string& r : restore_drives) {
      const auto eq = r.find('=');
      std::size_t index = 0;
      bool ok = eq != std::string::npos && eq > 0 && eq <= 2 && eq + 1 < r.size();
      for (std::size_t i = 0; ok && i < eq; ++i) {
        ok = r[i] >= '0' && r[i] <= '9';
        index = index * 10 + static_cast<std::size_t>(r[i] - '0');
      }
      if (!ok) {
        std::fprintf(stderr, "minivmm: error: --restore-drive: '%s' is not N=PATH\n", r.c_str());
        return to_int(ExitCode::kUsage);
      }
      renamed.emplace_back(index, r.substr(eq + 1));
    }
    minivmm::vmm::GivenOptions given;
    given.memory = run->count("--memory") > 0;
    given.cpus = run->count("--cpus") > 0;
    given.pit = run->count("--pit") > 0;
    given.pit_tick = run->count("--pit-tick") > 0;
    given.lost_ticks = run->count("--lost-ticks") > 0;
    given.cpu = run->count("--cpu") > 0;
    given.cpuid_mask = run->count("--cpuid-mask") > 0;
    given.console = run->count("--console") > 0;
    given.drives = run->count("--drive") > 0;
    given.nets = run->count("--net") > 0;
    given.testdev = c.testdev;
    // What the file says is its business: SnapshotError (the file) or StateError (its
    // configuration record) is one line naming the file and the section, exit 4.
    const auto bad_snapshot = [&](const std::string& why) {
      minivmm::log::error("--restore: {}: {}", minivmm::vmm::one_line(restore_path),
                          minivmm::vmm::one_line(why));
      return to_int(ExitCode::kBadKernel);
    };
    try {
      snapshot = minivmm::vmm::SnapshotFile::open(restore_path);
      const auto saved =
          minivmm::vmm::load_machine_config(snapshot->meta.section("config").data);
      if (saved.config.memory_bytes != snapshot->meta.memory_bytes) {
        throw minivmm::vmm::SnapshotError("the configuration says " +
                                          std::to_string(saved.config.memory_bytes) +
                                          " bytes of RAM, the memory section has " +
                                          std::to_string(snapshot->meta.memory_bytes));
      }
      if (const auto why = minivmm::vmm::merge_restored_config(c, given, saved, renamed)) {
        std::fprintf(stderr, "minivmm: error: %s\n", minivmm::vmm::one_line(*why).c_str());
        return to_int(ExitCode::kUsage);
      }
      // A drive path is stored resolved; a relative one (an older minivmm's) would open
      // whatever file of that name the current folder holds, so it must be given again.
      for (std::size_t i = 0; i < c.drives.size(); ++i) {
        const bool given_again = std::any_of(renamed.begin(), renamed.end(),
                                             [&](const auto& r) { return r.first == i; });
        if (!given_again && c.drives[i].path.front() != '/') {
          throw minivmm::devices::StateError(
              "config state: drive " + std::to_string(i) + "'s path '" + c.drives[i].path +
              "' is relative; give that drive with --restore-drive " + std::to_string(i) +
              "=PATH");
        }
      }
    } catch (const minivmm::vmm::SnapshotError& e) {
      // SnapshotFile::open's own messages already name the file.
      if (!snapshot) {
        minivmm::log::error("--restore: {}", minivmm::vmm::one_line(e.what()));
        return to_int(ExitCode::kBadKernel);
      }
      return bad_snapshot(e.what());
    } catch (const std::exception& e) {
      return bad_snapshot(e.what());
    }
  }

  try {
    // The stats file is judged with the other inputs (it is never one of them), opened once
    // they all passed and written whole at the end (vmm/host/output_file.h).
    minivmm::vmm::OutputFile stats;
    if (run->count("--stats") > 0) {
      if (c.stats_path == "-" && closed_std_fds[1]) {
        std::fprintf(stderr, "minivmm: error: --stats -: stdout is closed\n");
        return to_int(ExitCode::kUsage);
      }
      std::vector<minivmm::vmm::InputFile> inputs;
      if (!restoring) inputs.push_back({"--kernel", c.kernel_path});
      if (restoring) inputs.push_back({"--restore", restore_path});
      if (!c.initrd_path.empty()) inputs.push_back({"--initrd", c.initrd_path});
      for (const auto& d : c.drives) inputs.push_back({"--drive", d.path});
      if (!c.api_socket.empty()) inputs.push_back({"--api-socket", c.api_socket});
      stats = minivmm::vmm::OutputFile::check("--stats", c.stats_path, inputs);
    }
    minivmm::vmm::Machine machine(c, [&] { stats.open(); }, snapshot ? &*snapshot : nullptr);
    const int status = machine.run();
    const auto& report = machine.report();
    if (!c.quiet_summary) std::fputs(report.to_text().c_str(), stderr);
    if (stats.kind() != minivmm::vmm::OutputFile::Kind::kNone && !write_stats(report, stats)) {
      return to_int(ExitCode::kHostFailure);
    }
    return status;
  } catch (const minivmm::vmm::VmmError& e) {
    minivmm::log::error("{}", minivmm::vmm::one_line(e.what()));
    return to_int(e.code());
  } catch (const std::exception& e) {
    minivmm::log::error("{}", minivmm::vmm::one_line(e.what()));
    return to_int(ExitCode::kHostFailure);
  }
}
