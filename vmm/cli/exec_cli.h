// The `exec` subcommand's options, for main.cc only (a header for the reason test_cli.h gives:
// CLI11 is costly to compile, and main.cc includes it anyway). The checks and the run are in
// exec_command.cc, the work in vmm/exec/.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace minivmm::vmm::exec {

struct ExecCommandOptions {
  std::string kernel;
  std::string modules;
  std::vector<std::string> shares;  // DIR[,ro]
  std::string memory = "512M";
  std::string cpus = "1";
  std::string timeout = "0";
  bool verbose = false;
  std::string stats;
  bool stats_given = false;  // --stats "" is refused, not taken for no --stats
  std::vector<std::string> command;
};

// exec_command.cc: checks the options (one line and exit 2 for each bad one) and runs.
int run_exec_command(const ExecCommandOptions& o);

inline CLI::App* add_exec_subcommand(CLI::App& app, ExecCommandOptions& o) {
  CLI::App* e = app.add_subcommand(
      "exec", "boot a kernel, run one host command in it with the host's files, and return "
              "its exit status (docs/exec.md)");
  e->add_option("--kernel", o.kernel, "bzImage or PVH vmlinux (default /boot/vmlinuz-$(uname -r))")
      ->type_name("FILE");
  e->add_option("--modules", o.modules,
                "the kernel's lib/modules/VERSION folder (default /lib/modules/VERSION, VERSION "
                "read from the kernel image)")
      ->type_name("DIR");
  e->add_option("--share", o.shares,
                "a host folder at the same path in the guest, writable unless ,ro (repeatable)")
      ->allow_extra_args(false)
      ->type_name("DIR[,ro]");
  e->add_option("--memory", o.memory, "guest RAM")->capture_default_str();
  e->add_option("--cpus", o.cpus, "vCPUs")->capture_default_str();
  e->add_option("--timeout", o.timeout,
                "end the run after this long, as timeout(1) takes it (90s, 2m; 0: none): exit 253")
      ->capture_default_str();
  e->add_flag("--verbose", o.verbose, "show the kernel's messages on stderr as it boots");
  e->add_option("--stats", o.stats,
                "write the run's report (every device's counters) as JSON to FILE at the end, "
                "also after a --timeout")
      ->type_name("FILE")
      ->each([&o](const std::string&) { o.stats_given = true; });
  e->add_option("command", o.command, "the command and its arguments (after --)")
      ->type_name("COMMAND [ARGS...]");
  return e;
}

}  // namespace minivmm::vmm::exec
