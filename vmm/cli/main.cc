// minivmm: the process (standard fds, signals, logging), the command line's root and the
// subcommand it names. Each subcommand is its own files: `run` (run_cli.h, run_config.cc,
// run_command.cc), `test` (vmm/testrun/test_cli.h), `exec` (exec_cli.h, exec_command.cc).
// Everything else is in Machine.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>

#include "devices/log/log.h"
#include "vmm/cli/exec_cli.h"
#include "vmm/cli/run_cli.h"
#include "vmm/exit_code.h"
#include "vmm/host/crash_signals.h"
#include "vmm/testrun/test_cli.h"

namespace {

using minivmm::vmm::ExitCode;
using minivmm::vmm::to_int;

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
  minivmm::vmm::RunOptions run_options;
  run_options.closed_std_fds = plug_closed_std_fds();
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
  minivmm::vmm::add_log_level_option(app, run_options.log_level);
  CLI::App* run = minivmm::vmm::add_run_subcommand(app, run_options);
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
  minivmm::log::set_level(minivmm::log::level_from_name(run_options.log_level));
  if (test->parsed()) return minivmm::testrun::run_test_command(test_options);
  if (exec->parsed()) return minivmm::vmm::exec::run_exec_command(exec_options);
  minivmm::vmm::note_given_options(*run, run_options);
  return minivmm::vmm::run_command(run_options);
}
