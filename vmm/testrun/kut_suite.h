// kvm-unit-tests' rules for one cfg entry, from selection to the `minivmm run` command line,
// in the order the suite's scripts apply them (scripts/runtime.bash's run(), x86/run,
// scripts/arch-run.bash). Pure but for the host facts and shell callbacks passed in.
//
//  1. select_kut_entry: is the entry run at all (names, -g), or SKIPped before any VMM starts
//     (nodefault, arch, check, a missing file), with the suite's reason text;
//  2. prepare_kut_run: what the suite's "premature failure" probe finds (an accelerator minivmm
//     does not have, an option it refuses, a cfg value the shell cannot parse): a SKIP with
//     that reason; else the minivmm arguments, the mapping's warnings and the timeout;
//  3. kut_environment: the environment module every test gets as its initrd (`-initrd ENV`),
//     built once per run.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "vmm/testrun/kut_config.h"
#include "vmm/testrun/shell_words.h"
#include "vmm/testrun/verdict.h"

namespace minivmm::testrun {

struct KutSelection {
  std::vector<std::string> names;  // run only these (none: all)
  std::string group;               // -g: only this group (and nodefault ones with it)
  bool all = false;                // -a: nodefault ones too
};

struct KutHost {
  std::string arch = "x86_64";     // the suite's ARCH (config.mak)
  std::string test_dir = "x86";    // the suite's TEST_DIR
  bool kvm_available = true;       // /dev/kvm is a character device (the suite's kvm_available)
  // The contents of `path` with trailing newlines dropped, nullopt unless it is a regular file.
  std::function<std::optional<std::string>(const std::string& path)> read_file;
  // Whether `path` (relative to the suite's folder) is a regular file.
  std::function<bool(const std::string& path)> is_file;
  // Whether the cfg's disabled_if shell condition holds (only asked when it is not empty).
  std::function<bool(const std::string& condition)> disabled;
};

enum class Selected { kNo, kSkip, kRun };

struct Selection {
  Selected what = Selected::kNo;
  std::string reason;  // for kSkip
};

Selection select_kut_entry(const KutEntry& e, const KutSelection& sel, const KutHost& host);

// The kernel's path relative to the suite's folder ("x86/apic.flat"; "x86/" for no file key).
std::string kut_kernel_path(const KutEntry& e, const KutHost& host);

// A test ready to start.
struct KutLaunch {
  std::vector<std::string> run_args;  // for `minivmm run`
  std::string warnings;               // the option mapping's, one per line
};

// `suite_dir` makes the kernel path absolute; `env_path` is the environment module (empty:
// none); `env_error` is why it could not be made (every test then SKIPs with it, as the
// suite's do).
std::variant<KutLaunch, Verdict> prepare_kut_run(const KutEntry& e, const KutHost& host,
                                                 const ShellContext& shell,
                                                 const std::string& suite_dir,
                                                 const std::string& env_path,
                                                 const std::string& env_error);

// The timeout the suite gives `e`: `override_text` (the runner's --timeout) if set, else the
// cfg's, else "90s". The text is what the verdict quotes.
std::string kut_timeout_text(const KutEntry& e, const std::optional<std::string>& override_text);

// A timeout(1) duration ("90s", "30", "1.5m", "0"): seconds, 0 for none; nullopt when it is
// not one (a negative number is not one).
std::optional<double> parse_duration(std::string_view text);

struct KutEnvInputs {
  std::string kernel_release;  // uname -r
  std::string errata_path;                // config.mak's ERRATATXT (empty: none)
  std::optional<std::string> errata_txt;  // that file's contents, nullopt when it is missing
  std::vector<std::string> environ_errata;  // ERRATA_*=... from the runner's environment
  std::string user_env;        // the file KVM_UNIT_TESTS_ENV names, if any
  bool errata_force = false;   // -a
};

// The environment module (NAME=value lines), or nullopt with `error` (the suite's text).
std::optional<std::string> kut_environment(const KutEnvInputs& in, std::string& error);

}  // namespace minivmm::testrun
