// The run's spec that minivmm exec hands its init as /exec.spec (guest/exec_init/exec_init.h
// reads it): the command, the environment subset, the working folder, the 9p tags of the
// host's / and of each share, and the consoles for the command's stdout and stderr. Packed in
// a cpio of its own, appended to the cached initramfs (the kernel unpacks both).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minivmm::vmm::exec {

struct SpecShare {
  std::string tag;
  std::string path;  // absolute: where it appears in the guest (its host path)
  bool read_only = false;
};

struct ExecSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string cwd;
  std::string root_tag;
  std::vector<SpecShare> shares;
  std::string stdout_dev = "/dev/hvc0";
  std::string stderr_dev = "/dev/hvc1";
};

// The environment subset passed into the guest (docs/exec.md): PATH, HOME, USER, LOGNAME,
// TERM, LANG, LANGUAGE, TZ and every LC_*, as `environ` has them; PATH defaults to the usual
// system folders when unset. MINIVMM_EXEC=1 is added so a command can tell where it runs.
std::vector<std::string> exec_environment(char** environ_in);

// The spec's bytes, or nullopt and `why` when a string holds a NUL (it cannot be passed) or
// there is no command.
std::optional<std::vector<std::uint8_t>> encode_spec(const ExecSpec& spec, std::string& why);

}  // namespace minivmm::vmm::exec
