// A manifest of boot tests in TOML: each `[[test]]` names a kernel and how to run it, and what
// passes (an exit status, console lines that must and must not appear). `[defaults]` holds
// values every test takes unless it sets its own. docs/test-runner.md describes the format;
// tests/testrun/boot.toml is the bundled guest's.
//
//   [defaults]
//   kernel = "${build}/guest/minivmm-guest.bin"   # ${NAME}: --define NAME=VALUE, else the environment
//                                                  # (a path that starts with one is used as
//                                                  # given; other relative paths are relative
//                                                  # to the manifest's folder)
//   timeout = 20                                   # seconds; 0: none
//
//   [[test]]
//   name = "pit-250hz"
//   cmdline = "timer=pit hz=250 ticks=250"
//   args = ["--pit-tick", "loop"]                  # more `minivmm run` options
//   exit = 1                                       # the guest's debug-exit success
//   console = ["done 250"]
//   not_console = ["exception"]
//
// Everything is checked when the file is read: a syntax error, an unknown key, a value of the
// wrong type or out of range, a duplicate name, an undefined ${NAME} and a test that asserts
// nothing (no `exit`) each throw a ManifestError naming the file and line. A kernel that does
// not exist is not an error of the manifest: that test fails when it is due, the others run.
// toml++ is included by manifest.cc only (it is a large header library).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/testrun/test_case.h"

namespace minivmm::testrun {

class ManifestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `path` names the file in errors and is the folder relative paths start from. `defines` are
// the --define NAME=VALUE pairs; `getenv` looks up the environment (injected for tests).
std::vector<TestCase> parse_manifest(std::string_view text, const std::string& path,
                                     const std::map<std::string, std::string>& defines,
                                     const std::function<std::optional<std::string>(const std::string&)>& getenv);

// Reads and parses the file at `path` (a missing or unreadable file is a ManifestError too).
std::vector<TestCase> load_manifest(const std::string& path,
                                    const std::map<std::string, std::string>& defines);

}  // namespace minivmm::testrun
