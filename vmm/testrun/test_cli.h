// The `test` subcommand's options, for main.cc only. A header, not a .cc: CLI11 is a header
// library that costs ~9 s of compile per file that includes it, and main.cc includes it anyway.
#pragma once

#include <CLI/CLI.hpp>

#include "vmm/testrun/test_command.h"

namespace minivmm::testrun {

inline CLI::App* add_test_subcommand(CLI::App& app, TestCommandOptions& o) {
  CLI::App* t = app.add_subcommand(
      "test", "run a suite of boot tests in parallel: kvm-unit-tests' x86 suite, or manifests of "
              "your own (docs/test-runner.md)");
  t->add_option("--kvm-unit-tests", o.kvm_unit_tests,
                "a built kvm-unit-tests tree: run the entries of its x86/unittests.cfg as its "
                "run_tests.sh does")
      ->type_name("DIR");
  // One value per option (CLI11's vectors would take the test names that follow too).
  t->add_option("--manifest", o.manifests, "a TOML manifest of tests (repeatable)")
      ->allow_extra_args(false)
      ->type_name("FILE");
  t->add_option("names", o.filters, "run only these tests (names or shell patterns)")
      ->type_name("NAME");
  t->add_option("-g,--group", o.group, "run only the tests of this group")->type_name("GROUP");
  t->add_flag("-a,--all", o.all, "also run the suite's nodefault tests (and set ERRATA_FORCE=y)");
  t->add_flag("-l,--list", o.list, "list the tests that would run, and exit");
  t->add_option("-j,--jobs", o.jobs, "tests at once (default: the host's CPUs)")->type_name("N");
  t->add_option("--timeout", o.timeout,
                "every test's timeout, as timeout(1) takes it (90s, 2m; 0: none), instead of "
                "its own")
      ->type_name("DURATION");
  t->add_option("--tap", o.tap, "write a TAP version 13 report to FILE, or - for stdout")
      ->type_name("FILE");
  t->add_option("--junit", o.junit, "write a JUnit XML report to FILE")->type_name("FILE");
  t->add_option("--logs", o.logs,
                "keep each test's console (NAME.log), stderr, command (NAME.cmd) and run report "
                "(NAME.json) in DIR, with results.tsv")
      ->type_name("DIR");
  t->add_flag("--gdb-on-fault", o.gdb_on_fault,
              "run each test with a gdb stub (a UNIX socket beside its logs) and hold one that "
              "panics or triple-faults for the debugger, saying which test and where; a held "
              "test's timeout stops counting (docs/gdb.md)");
  t->add_option("-D,--define", o.defines, "NAME=VALUE for ${NAME} in manifests (repeatable)")
      ->allow_extra_args(false)
      ->type_name("NAME=VALUE");
  return t;
}

}  // namespace minivmm::testrun
