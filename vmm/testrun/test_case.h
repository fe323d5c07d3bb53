// One test `minivmm test` knows about, from either source, before it runs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "vmm/testrun/verdict.h"

namespace minivmm::testrun {

struct TestCase {
  enum class Kind { kSuite, kManifest };

  std::string name;
  Kind kind = Kind::kManifest;
  std::string origin;  // where it is defined: "boot.toml:12", "x86/unittests.cfg:40"
  std::vector<std::string> groups;

  // A verdict known without starting anything: a SKIP by the suite's rules.
  std::optional<Verdict> decided;

  // kManifest: the `minivmm run` arguments, whole. kSuite: they are made when the test starts
  // (a cfg value can run a command, `date +%s`, whose output must be fresh).
  std::vector<std::string> run_args;
  std::size_t suite_entry = 0;  // kSuite: the index in the cfg's entries
  std::string kernel;           // kManifest: checked when the test starts ("" for exec's default)
  // The minivmm subcommand run_args are for: "run", or "exec" for a manifest's `command`.
  std::string subcommand = "run";

  std::optional<double> timeout_s;  // nullopt: none
  std::string timeout_text;         // as the verdict quotes it ("90s", "20s")
  Expectation expect;               // kManifest
};

}  // namespace minivmm::testrun
