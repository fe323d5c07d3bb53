// `minivmm run`'s options judged into a Config: every check of user input here comes before
// /dev/kvm, and each failure is one line on stderr and the usage exit code.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "vmm/cli/run_command.h"
#include "vmm/machine/size_parser.h"
#include "vmm/exit_code.h"
#include "vmm/gdb/gdb_stub.h"
#include "vmm/machine/virtio_mmio_devices.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

int usage(const std::string& line) {
  std::fprintf(stderr, "minivmm: error: %s\n", line.c_str());
  return to_int(ExitCode::kUsage);
}

// --restore against the options that only a boot or only a restore takes.
std::optional<int> check_restore_options(RunOptions& o) {
  const bool restoring = o.gave("--restore");
  if (!restoring && !o.gave("--kernel")) {
    return usage("--kernel is required (or --restore a snapshot) (see 'minivmm run --help')");
  }
  if (restoring) {
    // A run with a share refuses snapshots (docs/9p.md), so no snapshot has one to restore.
    for (const char* opt : {"--kernel", "--initrd", "--cmdline", "--share"}) {
      if (o.gave(opt)) {
        return usage(std::string(opt) +
                     ": a restored guest is not booted (leave it out with --restore)");
      }
    }
    if (o.restore_path.empty()) return usage("--restore: the path is empty");
  } else if (!o.restore_drives.empty()) {
    return usage("--restore-drive is for --restore");
  } else if (o.config.reset_rounds > 0) {
    return usage("--reset-on-exit is for --restore (a reset goes back to the snapshot it was "
                 "restored from)");
  } else if (!o.mailbox.empty()) {
    return usage("--mailbox is for --restore (a reset goes back to the snapshot it was "
                 "restored from)");
  }
  if (!o.mailbox.empty()) {
    const auto range = parse_mailbox(o.mailbox);
    if (!range) {
      return usage("--mailbox: '" + one_line(o.mailbox) +
                   "' is not GPA,SIZE with both page-aligned and SIZE > 0 (e.g. 0x200000,4096)");
    }
    o.config.mailbox_gpa = range->first;
    o.config.mailbox_bytes = range->second;
  }
  return std::nullopt;
}

// What the guest sees: each row of guest_options.h parses its own text, then the one rule
// between two of them.
std::optional<int> parse_guest_options(RunOptions& o) {
  Config& c = o.config;
  for (const GuestOption& g : guest_options()) {
    if (const auto why = g.parse(g, o.guest[g.name], c)) return usage(*why);
  }
  if (c.pit == PitMode::kKvm && o.gave("--pit-tick")) {
    return usage("--pit-tick: KVM's in-kernel PIT (--pit kvm) delivers its own ticks; "
                 "--pit-tick applies to --pit user");
  }
  return std::nullopt;
}

// The host's business: how long, which alarm and poller, console input, the sandbox.
std::optional<int> parse_host_options(RunOptions& o) {
  Config& c = o.config;
  c.alarm = *timers::parse_alarm_kind(o.alarm);
  c.poller = *loop::parse_poller_kind(o.poll);
  // CLI::Range lets NaN through (every comparison with it is false).
  if (std::isnan(o.duration)) return usage("--duration: not a number");
  if (o.duration > 0) c.duration_s = o.duration;
  c.console_input = !o.no_input;
  if (o.irq_inject != "auto") c.irq_inject_ioctl = o.irq_inject == "ioctl";
  if (o.timer_slack > 0) c.timer_slack_ns = o.timer_slack;
  if (o.gave("--cpu-affinity")) {
    std::string why;
    const auto affinity = parse_cpu_affinity(o.cpu_affinity, allowed_cpus(), why);
    if (!affinity) return usage("--cpu-affinity: " + why);
    c.cpu_affinity = *affinity;
  }
  c.seccomp = *parse_seccomp_mode(o.seccomp);
  if (!o.seccomp_selftest.empty()) {
    c.seccomp_selftest = parse_thread_kind(o.seccomp_selftest);
    if (!c.seccomp_selftest) {
      return usage("--seccomp-selftest: unknown thread kind '" + o.seccomp_selftest +
                   "' (loop, vcpu, signals, blk or 9p)");
    }
  }
  return std::nullopt;
}

// --drive, --net and --share, each spec parsed, and the virtio windows they need counted; last, the
// control socket's path (the order in which a command line's errors have always been said).
std::optional<int> parse_device_specs(RunOptions& o) {
  Config& c = o.config;
  for (const std::string& spec : o.drives) {
    std::string why;
    const auto d = parse_drive_spec(spec, why);
    if (!d) return usage("--drive: " + why);
    c.drives.push_back(*d);
  }
  for (const std::string& spec : o.nets) {
    std::string why;
    const auto n = parse_net_spec(spec, why);
    if (!n) return usage("--net: " + why);
    c.nets.push_back(*n);
  }
  for (const std::string& spec : o.shares) {
    std::string why;
    const auto sh = parse_share_spec(spec, c.shares.size(), why);
    if (!sh) return usage("--share: " + why);
    c.shares.push_back(*sh);
  }
  // libslirp keeps global state: one user-mode network per process.
  if (std::count_if(c.nets.begin(), c.nets.end(),
                    [](const NetSpec& n) { return n.kind == NetSpec::Kind::kUser; }) > 1) {
    return usage("--net: at most one user-mode network (--net user)");
  }
  if (c.virtio_devices() > VirtioMmioDevices::kMaxDevices) {
    return usage("--drive, --net, --share, --console virtio: at most " +
                 std::to_string(VirtioMmioDevices::kMaxDevices) + " virtio devices");
  }
  if (o.gave("--gdb") && !gdb::parse_gdb_address(c.gdb)) {
    return usage("--gdb: want tcp:[HOST]:PORT or unix:PATH, not '" + c.gdb + "'");
  }
  if ((c.gdb_wait || c.gdb_on_fault) && c.gdb.empty()) {
    return usage("--gdb-wait and --gdb-on-fault need --gdb");
  }
  if (o.gave("--api-socket") && c.api_socket.empty()) {
    return usage("--api-socket: the path is empty");
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> build_run_config(RunOptions& o) {
  for (auto step : {check_restore_options, parse_guest_options, parse_host_options,
                    parse_device_specs}) {
    if (const auto code = step(o)) return code;
  }
  return std::nullopt;
}

}  // namespace minivmm::vmm
