// `minivmm exec`'s checks: every option judged before anything runs, one line each (exit 2).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <climits>

#include "devices/log/log.h"
#include "vmm/cli/exec_cli.h"
#include "vmm/machine/size_parser.h"
#include "vmm/exec/exec_run.h"
#include "vmm/exec/exec_status.h"
#include "vmm/machine/config.h"
#include "vmm/machine/vcpu_set.h"
#include "vmm/testrun/kut_suite.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm::exec {
namespace {

int exec_usage(const std::string& line) {
  std::fprintf(stderr, "minivmm: error: %s (see 'minivmm exec --help')\n", one_line(line).c_str());
  return kExecUsage;
}

// DIR[,ro] -> the folder resolved (it appears at that path in the guest), or nullopt and `why`.
std::optional<ExecShareOption> parse_share(const std::string& spec, std::string& why) {
  std::string dir = spec;
  ExecShareOption s;
  if (dir.size() > 3 && dir.compare(dir.size() - 3, 3, ",ro") == 0) {
    s.read_only = true;
    dir.resize(dir.size() - 3);
  } else if (dir.size() > 3 && dir.compare(dir.size() - 3, 3, ",rw") == 0) {
    dir.resize(dir.size() - 3);
  }
  char resolved[PATH_MAX];
  struct stat st{};
  if (dir.empty() || ::realpath(dir.c_str(), resolved) == nullptr ||
      ::stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode)) {
    why = "'" + spec + "' is not DIR[,ro] with DIR an existing folder";
    return std::nullopt;
  }
  s.path = resolved;
  if (s.path == "/") {
    why = "'" + spec + "': / is the guest's root already (read-only, with a tmpfs over it)";
    return std::nullopt;
  }
  return s;
}

}  // namespace

int run_exec_command(const ExecCommandOptions& c) {
  ExecOptions o;
  if (c.command.empty()) return exec_usage("exec: no command (minivmm exec [OPTIONS] -- COMMAND [ARGS...])");
  o.argv = c.command;
  o.kernel = c.kernel;
  o.modules_dir = c.modules;
  o.verbose = c.verbose;
  o.stats = c.stats_given;
  o.stats_path = c.stats;
  const auto mem = parse_size(c.memory);
  if (!mem) return exec_usage("--memory: '" + c.memory + "' is not a size (try 512M or 1G)");
  o.memory_bytes = *mem;
  char* end = nullptr;
  const long cpus = std::strtol(c.cpus.c_str(), &end, 10);
  if (c.cpus.empty() || *end != '\0' || cpus < 1 || cpus > static_cast<long>(kMaxVcpus)) {
    return exec_usage("--cpus: '" + c.cpus + "' is not a vCPU count from 1 to " +
                 std::to_string(kMaxVcpus));
  }
  o.cpus = static_cast<std::uint32_t>(cpus);
  const auto timeout = testrun::parse_duration(c.timeout);
  if (!timeout) return exec_usage("--timeout: '" + c.timeout + "' is not a duration (90s, 2m, 0)");
  o.timeout_s = *timeout;
  for (const std::string& s : c.shares) {
    std::string why;
    const auto share = parse_share(s, why);
    if (!share) return exec_usage("--share: " + why);
    o.shares.push_back(*share);
  }
  // minivmm's own info lines (a disk's engine, a cache rebuilt) only with --verbose: the
  // command's stderr is the user's.
  if (!c.verbose) log::set_level(log::level_from_name("warn"));
  return run_exec(o);
}

}  // namespace minivmm::vmm::exec
