// `minivmm run` after its options are judged (run_config.cc): a restore's snapshot opened and
// its configuration merged with the command line, then the machine built, run and reported.
#include "vmm/cli/run_command.h"

#include <algorithm>
#include <cstdio>

#include "devices/bus/device_state.h"
#include "devices/log/log.h"
#include "vmm/exit_code.h"
#include "vmm/host/output_file.h"
#include "vmm/kvm/kvm.h"
#include "vmm/machine/machine.h"
#include "vmm/machine/snapshot_config.h"
#include "vmm/snapshot/snapshot_file.h"
#include "vmm/vmm_error.h"

namespace minivmm::vmm {
namespace {

// --restore-drive N=PATH, each; nullopt (said on stderr) for a bad one.
std::optional<std::vector<std::pair<std::size_t, std::string>>> restore_renames(
    const RunOptions& o) {
  std::vector<std::pair<std::size_t, std::string>> renamed;
  for (const std::string& r : o.restore_drives) {
    const auto eq = r.find('=');
    std::size_t index = 0;
    bool ok = eq != std::string::npos && eq > 0 && eq <= 2 && eq + 1 < r.size();
    for (std::size_t i = 0; ok && i < eq; ++i) {
      ok = r[i] >= '0' && r[i] <= '9';
      index = index * 10 + static_cast<std::size_t>(r[i] - '0');
    }
    if (!ok) {
      std::fprintf(stderr, "minivmm: error: --restore-drive: '%s' is not N=PATH\n", r.c_str());
      return std::nullopt;
    }
    renamed.emplace_back(index, r.substr(eq + 1));
  }
  return renamed;
}

// The snapshot's configuration into o.config. Throws SnapshotError or StateError for what the
// file says; returns a usage exit code for a command line that contradicts it.
std::optional<int> merge_snapshot(RunOptions& o, const SnapshotFile& snapshot,
                                  const std::vector<std::pair<std::size_t, std::string>>& renamed) {
  Config& c = o.config;
  const auto saved = load_machine_config(snapshot.meta.section("config").data);
  if (saved.config.memory_bytes != snapshot.meta.memory_bytes) {
    throw SnapshotError("the configuration says " + std::to_string(saved.config.memory_bytes) +
                        " bytes of RAM, the memory section has " +
                        std::to_string(snapshot.meta.memory_bytes));
  }
  if (const auto why = merge_restored_config(c, o.given, saved, renamed)) {
    std::fprintf(stderr, "minivmm: error: %s\n", one_line(*why).c_str());
    return to_int(ExitCode::kUsage);
  }
  // A drive path is stored resolved; a relative one (an older minivmm's) would open whatever
  // file of that name the current folder holds, so it must be given again.
  for (std::size_t i = 0; i < c.drives.size(); ++i) {
    const bool given_again =
        std::any_of(renamed.begin(), renamed.end(), [&](const auto& r) { return r.first == i; });
    if (!given_again && c.drives[i].path.front() != '/') {
      throw devices::StateError("config state: drive " + std::to_string(i) + "'s path '" +
                                c.drives[i].path + "' is relative; give that drive with " +
                                "--restore-drive " + std::to_string(i) + "=PATH");
    }
  }
  return std::nullopt;
}

// --restore: the file opened and merged into o.config. What the file says is its business:
// SnapshotError (the file) or StateError (its configuration record) is one line naming the
// file and the section, exit 4.
std::optional<int> open_snapshot(RunOptions& o, std::optional<SnapshotFile>& snapshot) {
  const auto renamed = restore_renames(o);
  if (!renamed) return to_int(ExitCode::kUsage);
  const auto bad_snapshot = [&](const std::string& why) {
    log::error("--restore: {}: {}", one_line(o.restore_path), one_line(why));
    return to_int(ExitCode::kBadKernel);
  };
  try {
    snapshot = SnapshotFile::open(o.restore_path);
    return merge_snapshot(o, *snapshot, *renamed);
  } catch (const SnapshotError& e) {
    // SnapshotFile::open's own messages already name the file.
    if (!snapshot) {
      log::error("--restore: {}", one_line(e.what()));
      return to_int(ExitCode::kBadKernel);
    }
    return bad_snapshot(e.what());
  } catch (const std::exception& e) {
    return bad_snapshot(e.what());
  }
}

// The report, whole, to the --stats target; a failure is said, not swallowed.
bool write_stats(const RunReport& report, OutputFile& out) {
  std::string why;
  if (out.write(report.to_json().dump(2) + "\n", why)) return true;
  log::error("--stats: cannot write the report to '{}': {}", out.path(), why);
  return false;
}

// The machine, run; the report to stderr and --stats.
int run_machine(RunOptions& o, const SnapshotFile* snapshot) {
  const Config& c = o.config;
  // The stats file is judged with the other inputs (it is never one of them), opened once they
  // all passed and written whole at the end (vmm/host/output_file.h).
  OutputFile stats;
  if (o.gave("--stats")) {
    if (c.stats_path == "-" && o.closed_std_fds[1]) {
      std::fprintf(stderr, "minivmm: error: --stats -: stdout is closed\n");
      return to_int(ExitCode::kUsage);
    }
    std::vector<InputFile> inputs;
    if (snapshot == nullptr) inputs.push_back({"--kernel", c.kernel_path});
    if (snapshot != nullptr) inputs.push_back({"--restore", o.restore_path});
    if (!c.initrd_path.empty()) inputs.push_back({"--initrd", c.initrd_path});
    for (const auto& d : c.drives) inputs.push_back({"--drive", d.path});
    if (!c.api_socket.empty()) inputs.push_back({"--api-socket", c.api_socket});
    stats = OutputFile::check("--stats", c.stats_path, inputs);
  }
  Machine machine(c, [&] { stats.open(); }, snapshot);
  const int status = machine.run();
  const auto& report = machine.report();
  if (!c.quiet_summary) std::fputs(report.to_text().c_str(), stderr);
  if (stats.kind() != OutputFile::Kind::kNone && !write_stats(report, stats)) {
    return to_int(ExitCode::kHostFailure);
  }
  return status;
}

}  // namespace

int run_command(RunOptions& o) {
  if (const auto code = build_run_config(o)) return *code;
  // The command line holds together: KVM's CPUID answer comes on a thread while the snapshot
  // is opened and the machine set up (vmm/kvm/kvm.h).
  prefetch_supported_cpuid();
  std::optional<SnapshotFile> snapshot;
  if (o.gave("--restore")) {
    if (const auto code = open_snapshot(o, snapshot)) return *code;
  }
  try {
    return run_machine(o, snapshot ? &*snapshot : nullptr);
  } catch (const VmmError& e) {
    log::error("{}", one_line(e.what()));
    return to_int(e.code());
  } catch (const std::exception& e) {
    log::error("{}", one_line(e.what()));
    return to_int(ExitCode::kHostFailure);
  }
}

}  // namespace minivmm::vmm
