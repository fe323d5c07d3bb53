// The `run` subcommand's options, for main.cc only (a header, as testrun/test_cli.h says why:
// CLI11 costs seconds of compile per file that includes it). The options land in RunOptions
// as text; run_config.cc judges them and builds the Config, run_command.cc runs the machine.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "timers/alarm_timer.h"
#include "vmm/cli/run_command.h"
#include "vmm/machine/guest_options.h"

namespace minivmm::vmm {

// CLI11 validator for an enum whose parser returns an optional.
template <typename Parse>
CLI::Validator enum_validator(Parse parse, const char* what) {
  return CLI::Validator(
      [parse, what](std::string& s) -> std::string {
        if (parse(s)) return "";
        return std::string("unknown ") + what + " '" + s + "'";
      },
      "", what);
}

inline void add_log_level_option(CLI::App& app, std::string& level) {
  app.add_option("--log-level", level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
}

// Boot and restore: what the guest runs and from where.
inline void add_boot_options(CLI::App* run, RunOptions& o) {
  Config& c = o.config;
  run->add_option("--kernel", c.kernel_path, "bzImage or PVH vmlinux to boot");
  run->add_option("--restore", o.restore_path,
                  "start from a snapshot (the control socket's \"snapshot\" command) instead of "
                  "booting: no --kernel; what the guest sees comes from the snapshot "
                  "(docs/snapshot.md)");
  run->add_option("--restore-drive", o.restore_drives,
                  "with --restore: N=PATH gives the snapshot's drive N another file of the same "
                  "size (a clone's own copy); repeatable");
  run->add_option("--mailbox", o.mailbox,
                  "with --restore: GPA,SIZE (page-aligned, bytes or hex) of guest memory that "
                  "{\"cmd\":\"reset\"} leaves alone and {\"cmd\":\"mailbox\"} reads and writes "
                  "(docs/snapshot.md)");
  run->add_option("--reset-on-exit", c.reset_rounds,
                  "with --restore: the guest's first N exits (debug-exit, reset, power-off, "
                  "panic) reset it to the snapshot instead of ending the run (docs/snapshot.md)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}));
  run->add_option("--initrd", c.initrd_path, "initial ramdisk");
  run->add_option("--cmdline", c.cmdline, "kernel command line");
}

// What the guest sees: its RAM, CPUs, PIT, devices (the snapshot's "config" record holds these).
inline void add_guest_options(CLI::App* run, RunOptions& o) {
  // The table's rows (vmm/machine/guest_options.h): name, help, default and accepted values
  // are the row's; run_config.cc parses the text with the row's parser.
  for (const GuestOption& g : guest_options()) {
    GuestText& text = o.guest[g.name];
    switch (g.kind) {
      case GuestOption::Kind::kValue: {
        text.value = g.default_text;
        CLI::Option* opt = run->add_option(g.name, text.value, g.help)->capture_default_str();
        if (!g.choices.empty()) {
          opt->check(CLI::IsMember(std::vector<std::string>(g.choices.begin(), g.choices.end())));
        }
        break;
      }
      case GuestOption::Kind::kList:
        run->add_option(g.name, text.list, g.help)->delimiter(',');
        break;
      case GuestOption::Kind::kFlag:
        run->add_flag(g.name, text.flag, g.help);
        break;
    }
  }
  // The options with rules of their own (snapshot_config.cc).
  run->add_option("--drive", o.drives,
                  "virtio-blk disk: FILE[,ro][,aio=io_uring|threads] (repeatable; aio: io_uring "
                  "where the kernel allows it, else a worker thread)");
  run->add_option("--net", o.nets,
                  "virtio-net NIC: tap=IFNAME[,mac=M] (an existing TAP interface), tap-fd=N[,mac=M] "
                  "(a TAP descriptor passed in) or user[,hostfwd=PROTO:[HOSTADDR]:HOSTPORT-"
                  "[GUESTADDR]:GUESTPORT]...[,mac=M] (user-mode networking, libslirp); repeatable");
  run->add_option("--share", o.shares,
                  "virtio-9p share: HOSTDIR[,ro] (repeatable; mount tags share0, share1, ... "
                  "in order; docs/9p.md)");
}

// The host's business: timers, polling, output, sandbox, affinity.
inline void add_host_options(CLI::App* run, RunOptions& o) {
  Config& c = o.config;
  run->add_option("--duration", o.duration,
                  "stop after this many seconds (0: run until the guest exits)")
      ->check(CLI::Range(0.0, 1e7));
  run->add_option("--stats", c.stats_path, "write run statistics as JSON to FILE, or - for stdout");
  run->add_flag("--quiet", c.quiet_summary, "do not print the summary on stderr");
  run->add_option("--alarm", o.alarm, "host alarm: dynticks, timerfd, ppoll, periodic")
      ->check(enum_validator(timers::parse_alarm_kind, "alarm"))
      ->capture_default_str();
  run->add_option("--poll", o.poll,
                  "wait primitive: ppoll, epoll, timerfd-epoll, auto (measures and switches)")
      ->check(enum_validator(loop::parse_poller_kind, "poll backend"))
      ->capture_default_str();
  run->add_option("--min-delta-ns", c.min_delta_ns, "shortest host alarm distance")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{100'000'000}))
      ->capture_default_str();
  run->add_option("--periodic-hz", c.periodic_alarm_hz, "rate of --alarm periodic")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100'000}))
      ->capture_default_str();
  run->add_option("--timer-slack", o.timer_slack, "PR_SET_TIMERSLACK for the loop thread, in ns")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000}));
  run->add_option("--api-socket", c.api_socket, "control socket path");
  // The gdb stub (docs/gdb.md).
  run->add_option("--gdb", c.gdb,
                  "serve gdb's remote protocol on tcp:[HOST]:PORT (loopback by default) or "
                  "unix:PATH (mode 0600)");
  run->add_flag("--gdb-wait", c.gdb_wait, "with --gdb: stop before the first guest instruction");
  run->add_flag("--gdb-on-fault", c.gdb_on_fault,
                "with --gdb: a guest that panics (pvpanic) or triple-faults waits for the "
                "debugger instead of ending the run");
  run->add_flag("--interactive", c.interactive,
                "raw terminal for the guest console (Ctrl-A x quits, Ctrl-A Ctrl-A sends Ctrl-A)");
  run->add_option("--irq-inject", o.irq_inject,
                  "how PIT ticks reach KVM: irqfd (1 syscall, a kernel worker injects), ioctl "
                  "(KVM_IRQ_LINE up and down: 2 syscalls, injected by the calling thread) or "
                  "auto (irqfd from the loop thread, ioctl from the vCPU thread)")
      ->check(CLI::IsMember({"auto", "irqfd", "ioctl"}))
      ->capture_default_str();
  run->add_flag("--no-console-input", o.no_input, "do not forward stdin to the guest's COM1");
  run->add_option("--seccomp", o.seccomp,
                  "per-thread syscall allow-lists: on (a forbidden syscall ends the run with "
                  "exit code 14), log (allowed, written to the kernel's audit log) or off")
      ->check(enum_validator(parse_seccomp_mode, "seccomp mode"))
      ->capture_default_str();
  // Hidden (group ""): a test hook, not a feature. The named thread kind makes a forbidden
  // syscall as soon as its filter is in place, so the tests can prove each kind is filtered
  // and reported (tests/integration/seccomp_test.cc).
  run->add_option("--seccomp-selftest", o.seccomp_selftest,
                  "test hook: loop, vcpu, signals, blk or 9p makes a forbidden syscall")
      ->group("");
  run->add_option("--cpu-affinity", o.cpu_affinity,
                  "pin threads to host CPUs: loop=CPU,vcpu=CPU (a CPU or a range a-b each; "
                  "default: not pinned)");
}

inline CLI::App* add_run_subcommand(CLI::App& app, RunOptions& o) {
  CLI::App* run = app.add_subcommand("run", "boot a kernel and run it");
  add_log_level_option(*run, o.log_level);
  add_boot_options(run, o);
  add_guest_options(run, o);
  add_host_options(run, o);
  return run;
}

// After parsing: which options the command line gave (their contradictions are judged on it).
inline void note_given_options(const CLI::App& run, RunOptions& o) {
  for (const CLI::Option* opt : run.get_options()) {
    if (opt->count() > 0) o.given.insert(opt->get_name());
  }
}

}  // namespace minivmm::vmm
