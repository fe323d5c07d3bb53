// `minivmm test`: the subcommand's options and what it does with them. main.cc registers the
// subcommand with add_test_subcommand() (test_cli.h) and, when it was given, returns
// run_test_command().
//
// Exit status: 0 when no test failed (SKIPs are not failures), 1 when any failed or timed out,
// 2 for a usage or manifest error (nothing runs then), 130 when a Ctrl-C stopped the run (the
// reports still hold every test that had finished).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace minivmm::testrun {

struct TestCommandOptions {
  std::string kvm_unit_tests;           // the suite's folder, built
  std::vector<std::string> manifests;   // TOML files
  std::vector<std::string> filters;     // test names or shell patterns
  std::string group;
  bool all = false;
  bool list = false;
  std::optional<long long> jobs;
  std::optional<std::string> timeout;   // overrides every test's
  std::string tap, junit, logs;
  std::vector<std::string> defines;     // NAME=VALUE for manifests
  bool gdb_on_fault = false;            // each test under --gdb unix:... --gdb-on-fault
};

int run_test_command(const TestCommandOptions& options);

}  // namespace minivmm::testrun
