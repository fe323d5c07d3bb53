// `minivmm run`: the options as the command line gave them (run_cli.h registers them), judged
// into a Config (run_config.cc), then a restore's snapshot opened and merged and the machine
// run (run_command.cc). No CLI11 here: these files compile without it.
#pragma once

#include <array>
#include <map>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vmm/machine/config.h"
#include "vmm/machine/guest_options.h"

namespace minivmm::vmm {

struct RunOptions {
  Config config;  // the options CLI11 stores straight into it
  std::string log_level = "info";
  std::string restore_path, mailbox;
  std::vector<std::string> restore_drives;
  // The guest-visible options' text by name (vmm/machine/guest_options.h's rows; run_cli.h
  // fills in each row's default as it registers it).
  std::map<std::string, GuestText, std::less<>> guest;
  std::string irq_inject = "auto", seccomp = "on";
  std::string alarm = std::string(timers::alarm_kind_name(Config{}.alarm));
  std::string poll = std::string(loop::poller_kind_name(Config{}.poller));
  std::string seccomp_selftest, cpu_affinity;
  std::vector<std::string> drives, nets, shares;
  double duration = 0;
  std::int64_t timer_slack = -1;
  bool no_input = false;
  // The options the command line gave ("--pit-tick"), after parsing.
  std::set<std::string> given;
  // Which of stdin, stdout, stderr the caller left closed (main.cc plugged them).
  std::array<bool, 3> closed_std_fds{};

  bool gave(const std::string& option) const { return given.count(option) > 0; }
};

// The options' text into o.config; on a usage error, says it on stderr (one line) and returns
// the exit code.
std::optional<int> build_run_config(RunOptions& o);

// The whole `run` after parsing: config, restore, machine, report. Returns the exit code.
int run_command(RunOptions& o);

}  // namespace minivmm::vmm
