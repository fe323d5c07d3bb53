// The shell's word splitting, for the one place kvm-unit-tests hands its values to a shell:
// run_tests.sh builds x86/run's command line from the cfg's raw `smp`, `test_args` and
// `qemu_params` text and `eval`s it. So `'cpuid'` is one word without its quotes,
// `"a b c"` is one word, a backticked command is run (`date +%s` for kvmclock_test), `$VAR`
// expands, an unquoted `#` at a word's start comments out the rest, and an unquoted `*`
// matches files in the suite's folder. This re-implements the part of the POSIX shell grammar
// those values use: quotes ('', "", $'' with \n \t \\ \'), backslashes, $NAME, ${NAME},
// `...` and $(...), field splitting of unquoted expansions on blanks, comments and pathname
// expansion. No control operators: a `;` or `|` is an ordinary character here, where the
// suite's eval would run a second command.
//
// Pure but for the three callbacks, which production wires to the environment, a child
// `bash -c` and glob(3) in the suite's folder (tests wire them to tables).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minivmm::testrun {

struct ShellContext {
  // A variable's value; nullopt expands to nothing.
  std::function<std::optional<std::string>(std::string_view name)> variable;
  // What `command` prints on stdout (a command substitution; trailing newlines are dropped by
  // the caller of this callback, here).
  std::function<std::string(std::string_view command)> command_output;
  // The files that match `pattern` (quoted characters are backslash-escaped in it), sorted;
  // empty when none does, and then the word stays as it was written.
  std::function<std::vector<std::string>(std::string_view pattern)> glob;
};

// The words of `text`, or nullopt with `error` set (an unterminated quote or substitution).
std::optional<std::vector<std::string>> shell_words(std::string_view text,
                                                    const ShellContext& ctx, std::string& error);

}  // namespace minivmm::testrun
