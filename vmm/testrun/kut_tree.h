// A built kvm-unit-tests tree on this host, where the suite's rules (kut_config, kut_suite:
// pure functions) meet the host's files and processes: its config.mak and unittests.cfg read
// once; the host's answers to the cfg's conditions (sysfs files, /dev/kvm, `disabled_if` run
// by bash in the suite's folder); the shell the cfg's values are expanded in (the environment,
// config.mak, $MAX_SMP, command substitution by bash, globs in the suite's folder); and the
// environment module every test gets as its initrd.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "vmm/testrun/kut_config.h"
#include "vmm/testrun/kut_suite.h"
#include "vmm/testrun/shell_words.h"

namespace minivmm::testrun {

// DIR is not a configured tree, or its cfg cannot be read: a usage error, nothing runs.
class KutTreeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct KutTree {
  std::string dir;
  std::map<std::string, std::string> config_mak;  // NAME=value lines
  std::string cfg_path;                           // "x86/unittests.cfg", relative to dir
  KutConfig cfg;                                  // its entries, and the warnings to print
  KutHost host;
};

// Reads DIR's config.mak and its TEST_DIR's unittests.cfg. Throws KutTreeError.
KutTree open_kut_tree(const std::string& dir);

// Whether /dev/kvm opens read-write: nullopt when it does, else why not.
std::optional<std::string> kvm_unusable();

// The shell context for the cfg's values of this tree.
ShellContext kut_shell(const KutTree& tree);

// The environment module's text for this host (`all`: -a's ERRATA_FORCE=y), or nullopt with
// `error`, the suite's text, with which every test then SKIPs.
std::optional<std::string> kut_host_environment(const KutTree& tree, bool all, std::string& error);

}  // namespace minivmm::testrun
