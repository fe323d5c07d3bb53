// kvm-unit-tests' `<arch>/unittests.cfg`, read the way the suite's own reader
// (for_each_unittest in scripts/common.bash) reads it, so that `minivmm test` runs the same
// entries with the same values:
//  - each line is trimmed of spaces and tabs; a last line without a newline is not read;
//  - `[NAME]` starts an entry (NAME is everything between the outermost brackets; `[]` is
//    ignored) and resets every key; keys before the first header are ignored;
//  - a key is lower case at the start of the line, spaces (not tabs) before and after `=`, and
//    its value is the rest of the line, verbatim: quotes, backticks and `$VAR` are the shell's
//    business when the test starts (shell_words.h);
//  - `extra_params` and `qemu_params` are one key; the `"""` form joins lines up to the one
//    ending in `"""`, a backslash-newline continuing the line;
//  - a line starting with `#` is no key, so `#[init]` is no entry; a `#` later in a value stays
//    in the value.
// Lines that look like a key the suite does not read (`Accel = kvm`, `timeout\t= 5`) are
// ignored as the suite ignores them, but said once each, so a typo is not silently lost.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minivmm::testrun {

struct KutEntry {
  std::string name;
  int line = 0;  // of its [NAME] header
  std::string file;  // the `file` value: a path below the suite's <arch>/ folder
  std::string smp = "1";
  bool has_test_args = false;  // without test_args there is no -append at all
  std::string test_args;
  std::string params;  // extra_params / qemu_params, raw
  std::string groups, arch, machine, check, accel, timeout, disabled_if;
};

struct KutConfig {
  std::vector<KutEntry> entries;
  std::vector<std::string> warnings;  // "unittests.cfg:12: ...", one per unknown key name
};

// `path` names the file in the warnings.
KutConfig parse_kut_config(std::string_view text, std::string_view path);

// The words of `entry` after the kernel on x86/run's command line, as one shell text, the way
// runtime.bash's get_cmdline joins them: "-smp N [-append ARGS] [PARAMS]". It is split into
// words by shell rules when the test starts (shell_words.h).
std::string kut_command_text(const KutEntry& entry);

// Whether `word` is one of the space-separated words of `list` (runtime.bash's find_word: a
// fixed-string match of " word " in " list ").
bool find_word(std::string_view word, std::string_view list);

}  // namespace minivmm::testrun
